"""The operator's commands: `cone init`, `status`, `send`, `reply`, `connect`,
`requests`, `accept`, `block`, `unblock`, `conversations`, `messages`, `contacts`,
`group …` and `tail`.

A facade like `cone serve`: each command turns its arguments into the parameters of
one core operation, checks them with that operation's schema (`cone.schema`), calls
the process holding the identity (or hosts the core for the call where that makes
sense; never for `status`), and prints the result: readable by default, or with
`--json` one JSON document, the JSON-RPC result. Errors are one line on stderr with
the reason and what to do (with `--json` also a JSON-RPC error object on stdout) and
the exit code of the error table in `cone.errors`.

stdout carries only the result: file descriptor 1 is pointed at stderr before any
library loads, so that nothing else (libxmtp's own log lines) can reach it.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from cone import errors
from cone._command import configure_logging, run_loop
from cone.commands import _render
from cone.commands._content import content
from cone.config import Settings
from cone.errors import ConeError, InvalidArgument, NoIdentity, StateError, Unavailable

if TYPE_CHECKING:
    from cone.startup import Reached

JsonObject = dict[str, Any]

# The database key's environment variable (docs/security.md: it wins over any file).
KEY_ENV = "CONE_DB_KEY"
# Exit code of `cone status` when the process answered but reports a problem.
UNHEALTHY = 1

# JSON parameter names as the command line spells them, for error messages.
_FLAGS = {
    "to": "TO",
    "text": "TEXT",
    "markdown": "TEXT",
    "key": "--key",
    "replyTo": "--reply-to",
    "name": "--name",
    "conversationId": "ID",
    "consumer": "--consumer",
    "members": "MEMBER",
    "limit": "--limit",
    "cursor": "--cursor",
    "before": "--before",
    "after": "--after",
    "imageUrl": "--image-url",
    "description": "--description",
}


@dataclass
class Context:
    """One command's run: its arguments, settings, stdout and its way to the core."""

    args: argparse.Namespace
    settings: Settings
    out: IO[str]
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    reached: Reached | None = None
    #: The conversation id the command's conversation argument resolved to.
    conversation: str | None = None

    @property
    def hosted(self) -> bool:
        """Whether this process started the core for the command."""
        return self.reached is not None and self.reached.embedded

    def emit(self, result: JsonObject, readable: str) -> None:
        """Print the result: JSON with --json, else the readable form."""
        if self.args.json:
            self.out.write(json.dumps(result, ensure_ascii=False) + "\n")
        else:
            self.out.write(readable + "\n")
        self.out.flush()


def state_flags(args: argparse.Namespace, *, home: bool = False) -> str:
    """The state flags the user gave, to repeat in a suggested command."""
    parts = []
    if home or args.home:
        from cone.config import resolve_home

        parts.append(f"--home {resolve_home(args.home)}")
    for flag, value in (
        ("--network", args.network),
        ("--api-url", args.api_url),
        ("--gateway-url", getattr(args, "gateway_url", None)),
        ("--key-file", args.key_file),
    ):
        if value:
            parts.append(f"{flag} {value}")
    return (" " + " ".join(parts)) if parts else ""


def _not_running(ctx: Context) -> ConeError:
    if not ctx.settings.paths.store.exists():
        return NoIdentity.of(ctx.settings.paths.home)
    return Unavailable(
        f"no cone process holds the identity in {ctx.settings.paths.home}: start it with "
        f"`cone daemon{state_flags(ctx.args)}`",
        reason="daemon_unavailable",
    )


def _named(ctx: Context) -> str:
    """The conversation the command line named, as the command resolved it."""
    return ctx.conversation or str(getattr(ctx.args, "conversation", "ID"))


def _explain(ctx: Context, err: ConeError) -> ConeError:
    """The error with what to do, in the command line's own words."""
    if err.reason == "daemon_unavailable" and "cone daemon" not in err.message:
        return Unavailable(
            f"cannot reach the process holding the identity on {ctx.settings.paths.socket} "
            f"(it stopped?): start it with `cone daemon{state_flags(ctx.args)}` and retry",
            reason=err.reason,
        )
    if err.reason in ("network_unavailable", "sync_failed") and "--api-url" not in err.message:
        err.message += (
            f" (node {ctx.settings.api_url}: is it up? choose another with --network or --api-url)"
        )
    elif err.reason == "not_accepted" and err.field == "conversationId":
        cid = _named(ctx)
        if " is a request" in err.message:
            err.message += f"; accept it with `cone accept {cid}`"
        elif " is blocked" in err.message:
            err.message += f"; unblock it with `cone unblock {cid}`, then accept it"
    elif isinstance(err, InvalidArgument) and err.field in _FLAGS:
        label = _FLAGS[err.field]
        if err.field == "conversationId" and ctx.args.command == "reply":
            label = "CONVERSATION"
        if err.message.startswith(err.field):
            err.message = label + err.message[len(err.field) :]
        err.message += f" (see `cone {ctx.args.command} --help`)"
    elif err.reason == "locked":
        err.message += "; or stop that process first"
    return err


async def _call(ctx: Context, method: str, params: JsonObject, *, host: bool = True) -> JsonObject:
    """One core operation, relayed to the holder of the identity or hosted here (the
    core is reached at the first call, after its parameters are checked, and kept for
    the command's later calls)."""
    from cone.rules import check
    from cone.schema import methods
    from cone.startup import held_by_other, reach_core

    spec = methods()[method]
    request = spec.to_request(params)
    # The daemon checks the same rules; checking here first means a bad argument is
    # exit 2 whether or not an identity or a daemon is there to ask.
    check(request)
    if ctx.reached is None:
        if not host and not held_by_other(ctx.settings):
            raise _not_running(ctx)
        # Only `cone init` creates an identity; every other command needs one there.
        create = ctx.args.command == "init"
        ctx.reached = await ctx.stack.enter_async_context(reach_core(ctx.settings, create=create))
    response = await ctx.reached.calls.call(
        spec.rpc, request, timeout=spec.timeout(request), long_poll=spec.long_poll
    )
    return spec.to_result(response)


async def _conversation(ctx: Context) -> str:
    """The conversation id the command's conversation argument names: an id, or what
    `send` takes (a contact name, an inbox id, an address; `_conversation.py`)."""
    from cone.commands._conversation import conversation_id

    async def call(method: str, params: JsonObject) -> JsonObject:
        return await _call(ctx, method, params)

    ctx.conversation = await conversation_id(call, ctx.args.conversation)
    return ctx.conversation


# ---- the commands ---------------------------------------------------------------------


def new_key() -> str:
    """A send key for a command given no --key (printed, so that a retry can reuse it)."""
    return f"cli-{secrets.token_hex(12)}"


def _key_source(ctx: Context) -> str:
    if os.environ.get(KEY_ENV):
        return f"${KEY_ENV}"
    if ctx.settings.key_file is not None:
        return str(ctx.settings.key_file)
    return str(ctx.settings.paths.default_key_file)


def _backend(ctx: Context, ident: JsonObject) -> str:
    """Which XMTP backend the identity runs on, and through which URL (as far as this
    command's settings know it: a daemon started with other flags may use another)."""
    if ident.get("backend") == "d14n":
        gateway = ctx.settings.gateway_url or ctx.settings.cutover_gateway
        return f"over D14N (gateway {gateway})" if gateway else "over D14N"
    return f"over V3 (node {ctx.settings.api_url})"


async def _init(ctx: Context) -> int:
    ident = await _call(ctx, "identity", {})
    created = ctx.reached is not None and ctx.reached.created
    result = {
        **ident,
        "created": created,
        "home": str(ctx.settings.paths.home),
        "keySource": _key_source(ctx),
    }
    flags = state_flags(ctx.args, home=True)
    head = "created a new identity" if created else "this state directory already has an identity"
    key_note = (
        " (made on first start; keep it apart from backups)"
        if result["keySource"] == str(ctx.settings.paths.default_key_file)
        else ""
    )
    ctx.emit(
        result,
        f"cone init: {head}\n"
        f"  address       {ident['address']}\n"
        f"  inbox id      {ident['inboxId']}\n"
        f"  installation  {ident['installationId']}\n"
        f"  network       {ident['network']} {_backend(ctx, ident)}\n"
        f"  state         {ctx.settings.paths.home}\n"
        f"  database key  {result['keySource']}{key_note}\n"
        "next steps:\n"
        f"  keep it online   cone daemon{flags}\n"
        f"  or run an agent  cone bridge{flags} -- COMMAND\n"
        f"  check health     cone status{flags}\n"
        "  then give peers the address above; their first messages wait in `cone requests`",
    )
    return 0


async def _status(ctx: Context) -> int:
    result = await _call(ctx, "status", {}, host=False)
    ctx.emit(result, _render.status(result))
    return UNHEALTHY if _render.problems(result) else 0


def _check_destination(value: str, field: str) -> None:
    """Malformed destinations exit 2 before a core is reached (or started); the core's
    resolver reads destinations by the same module and does the rest."""
    from cone import destination

    destination.check(value, field)


async def _send(ctx: Context) -> int:
    args = ctx.args
    if args.command == "send":
        _check_destination(args.to, "to")
    key, generated = args.key, args.key is None
    if generated:
        key = new_key()
    if args.command == "reply":
        cid = await _conversation(ctx)
        params: JsonObject = {"conversationId": cid, "text": args.text, "key": key}
        method = "reply"
    else:
        method = "send"
        params = {"to": args.to, "key": key, **content(args)}
        if args.reply_to:
            params["replyTo"] = args.reply_to
    result = await _call(ctx, method, params)
    ctx.emit({**result, "key": key}, _render.sent(result, key, generated, ctx.hosted))
    return 0


async def _connect(ctx: Context) -> int:
    _check_destination(ctx.args.to, "to")
    params: JsonObject = {"to": ctx.args.to}
    if ctx.args.name:
        params["name"] = ctx.args.name
    result = await _call(ctx, "connect", params)
    ctx.emit(result, _render.contact(result))
    return 0


async def _requests(ctx: Context) -> int:
    result = await _call(ctx, "requests", {})
    groups: dict[str, JsonObject] = {}
    if not ctx.args.json and any(r.get("conversationType") == "group" for r in result["requests"]):
        # A request holds identities only; the listing has a group's name and size.
        params: JsonObject = {"consent": "requested", "type": "group", "limit": 1000}
        while True:
            page = await _call(ctx, "conversations", params)
            groups.update((c["conversationId"], c) for c in page["conversations"])
            if not page.get("cursor"):
                break
            params = {**params, "cursor": page["cursor"]}
    ctx.emit(result, _render.requests(result, groups))
    return 0


async def _decide(ctx: Context) -> int:
    cid = await _conversation(ctx)
    result = await _call(ctx, ctx.args.command, {"conversationId": cid})
    done = "accepted" if ctx.args.command == "accept" else "blocked"
    ctx.emit(result, f"{done} {cid}")
    return 0


async def _unblock(ctx: Context) -> int:
    cid = await _conversation(ctx)
    result = await _call(ctx, "unblock", {"conversationId": cid})
    ctx.emit(result, f"unblocked {cid}: it is a request again (`cone accept {cid}` lets it in)")
    return 0


def _given(**params: Any) -> JsonObject:
    return {k: v for k, v in params.items() if v is not None and v is not False}


async def _conversations(ctx: Context) -> int:
    a = ctx.args
    params = _given(consent=a.consent, type=a.type, limit=a.limit, cursor=a.cursor)
    result = await _call(ctx, "conversations", params)
    ctx.emit(result, _render.conversations(result))
    return 0


async def _messages(ctx: Context) -> int:
    a = ctx.args
    params = _given(
        conversationId=await _conversation(ctx),
        limit=a.limit,
        before=a.before,
        after=a.after,
        oldestFirst=a.oldest_first or None,
    )
    result = await _call(ctx, "messages", params)
    ctx.emit(result, _render.history(result, oldest_first=bool(a.oldest_first)))
    return 0


async def _contacts(ctx: Context) -> int:
    result = await _call(ctx, "contacts", {})
    ctx.emit(result, _render.contacts(result))
    return 0


async def _group(ctx: Context) -> int:
    a = ctx.args
    action = a.group_command
    if action == "create":
        for member in a.members:
            _check_destination(member, "members")
        key, generated = a.key, a.key is None
        if generated:
            key = new_key()
        params = _given(
            members=a.members, key=key, name=a.name, description=a.description, imageUrl=a.image_url
        )
        result = await _call(ctx, "createGroup", params)
        note = f" (key {key}: reuse it to retry)" if generated else ""
        ctx.emit({**result, "key": key}, _render.group(result["group"]) + note)
    elif action == "members":
        result = await _call(ctx, "members", {"conversationId": await _conversation(ctx)})
        ctx.emit(result, _render.members(result))
    elif action in ("add", "remove"):
        for member in a.members:
            _check_destination(member, "members")
        method = "addMembers" if action == "add" else "removeMembers"
        cid = await _conversation(ctx)
        result = await _call(ctx, method, {"conversationId": cid, "members": a.members})
        done = "added" if action == "add" else "removed"
        where = "to" if action == "add" else "from"
        head = f"{done} {len(a.members)} member(s) {where} group {cid}; its members now:"
        ctx.emit(result, head + "\n" + _render.members(result))
    elif action == "leave":
        cid = await _conversation(ctx)
        result = await _call(ctx, "leaveGroup", {"conversationId": cid})
        ctx.emit(result, f"left {cid}")
    else:
        params = _given(
            conversationId=await _conversation(ctx),
            name=a.name,
            description=a.description,
            imageUrl=a.image_url,
        )
        result = await _call(ctx, "updateGroup", params)
        ctx.emit(result, _render.group(result["group"]))
    return 0


async def _sync(ctx: Context) -> int:
    result = await _call(ctx, "sync", {})
    ctx.emit(
        result,
        "synced with the XMTP node: welcomes, conversations, messages and consent taken in",
    )
    return 0


async def _tail(ctx: Context) -> int:
    from cone.commands._tail import tail

    return await tail(ctx, _call)


_HANDLERS: dict[str, Callable[[Context], Awaitable[int]]] = {
    "init": _init,
    "status": _status,
    "send": _send,
    "reply": _send,
    "connect": _connect,
    "requests": _requests,
    "accept": _decide,
    "block": _decide,
    "unblock": _unblock,
    "conversations": _conversations,
    "messages": _messages,
    "contacts": _contacts,
    "group": _group,
    "sync": _sync,
    "tail": _tail,
}
# Commands that never start the core themselves (they report on a running one).
_RELAY_ONLY = frozenset({"status"})


def one_line(message: str, limit: int = 400) -> str:
    """An error message on one line (`cone.errors.one_line`), at most `limit` characters."""
    message = errors.one_line(message)
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _fail(ctx_args: argparse.Namespace, out: IO[str], err: ConeError) -> int:
    err.message = one_line(err.message)
    if ctx_args.json:
        error = {"code": err.jsonrpc_code, "message": err.message, "data": err.data()}
        out.write(json.dumps({"error": error}, ensure_ascii=False) + "\n")
        out.flush()
    print(f"cone {ctx_args.command}: {err.message}", file=sys.stderr, flush=True)
    return err.exit_code


def run(args: argparse.Namespace) -> int:
    """Run one operator command; the exit code follows the error table in cone.errors."""
    from cone.facades._stdio import guard_stdout
    from cone.startup import held_by_other, settings_from

    out = os.fdopen(guard_stdout(), "w", encoding="utf-8", errors="replace")
    configure_logging(args.verbose, quiet=True)
    with out:
        try:
            settings = settings_from(args)
        except ConeError as err:
            return _fail(args, out, err)
        ctx = Context(args, settings, out)
        code = 0

        async def main() -> None:
            nonlocal code
            async with ctx.stack:
                code = await _HANDLERS[args.command](ctx)

        try:
            hosting = args.command not in _RELAY_ONLY and not held_by_other(settings)
            run_loop(main(), hosting=hosting)
        except ConeError as err:
            return _fail(args, out, _explain(ctx, err))
        except KeyboardInterrupt:
            return 0 if args.command == "tail" else 130
        except OSError as err:  # the state directory itself (permissions, a full disk)
            return _fail(args, out, StateError(f"{settings.paths.home}: {err}"))
        return code


__all__ = ["Context", "one_line", "run", "state_flags"]
