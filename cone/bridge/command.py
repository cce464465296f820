"""`cone bridge [OPTIONS] -- COMMAND [ARGS…]`: the agent's command, once per turn.

Relays to the process that holds the identity, or hosts the core itself (and serves
`cone.sock`, so `cone serve`, `cone mcp` and gRPC clients relay to it, e.g. to accept
requests). SIGTERM or SIGINT stops it: running commands get SIGTERM (then SIGKILL),
their turns stay unacknowledged and run again at the next start.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from cone._command import configure_logging, exit_code, run_loop
from cone.config import Settings
from cone.errors import InvalidArgument
from cone.facades.http.options import HttpOptions

if TYPE_CHECKING:
    from cone.bridge import BridgeConfig

log = logging.getLogger("cone.bridge")
#: The bridge's consumer plus `.context` must stay a valid consumer name.
_CONSUMER_MAX = 56


def _config(args: argparse.Namespace, settings: Settings) -> BridgeConfig:
    from cone.bridge import BridgeConfig
    from cone.bridge._env import check_pass_env

    return BridgeConfig(
        argv=list(args.agent),
        consumer=args.consumer,
        alias=args.alias,
        concurrency=args.concurrency,
        timeout_s=args.timeout,
        max_attempts=args.max_attempts,
        backoff_s=args.backoff,
        context_cap=args.context,
        home=settings.paths.home,
        pass_env=tuple(check_pass_env(args.pass_env or [])),
        reactions=args.reactions,
    )


def _check(args: argparse.Namespace) -> None:
    from cone.bridge import valid_alias

    if args.agent and args.agent[0] == "--":
        args.agent = args.agent[1:]
    from cone.rules import check
    from conepb.v1 import cone_pb2

    try:  # the consumer and its `.context` consumer must both be valid consumers
        check(cone_pb2.ReceiveRequest(consumer=f"{args.consumer}.context"))
    except InvalidArgument:
        raise InvalidArgument(
            f"--consumer must be 1–{_CONSUMER_MAX} letters, digits, '.', '_', ':' or '-', "
            "starting with a letter or digit",
            field="consumer",
        ) from None
    if args.parked:
        return
    if not args.agent:
        raise InvalidArgument(
            "give the agent's command after --, e.g. cone bridge -- python agent.py",
            field="command",
        )
    if args.alias is not None and not valid_alias(args.alias):
        raise InvalidArgument(
            "--alias must be a letter or digit, then letters, digits, '.', '_' or '-'",
            field="alias",
        )
    for name, value, low in (
        ("concurrency", args.concurrency, 1),
        ("max-attempts", args.max_attempts, 1),
        ("context", args.context, 0),
    ):
        if value < low:
            raise InvalidArgument(f"--{name} must be at least {low}", field=name)
    if args.timeout <= 0 or args.backoff < 0:
        raise InvalidArgument("--timeout must be positive and --backoff not negative")
    exe = args.agent[0]
    if shutil.which(exe) is None:
        raise InvalidArgument(f"the agent command {exe!r} is not found or not executable")


async def _main(args: argparse.Namespace, settings: Settings) -> None:
    from cone._shutdown import Shutdown
    from cone.bridge import Bridge, Journal
    from cone.schema import message_to_json
    from cone.startup import reach_core
    from conepb.v1 import cone_pb2 as pb

    config = _config(args, settings)
    # As `cone daemon`: a signal cancels a start still waiting on the network, and
    # the process exits within the bound (agents get STOP_GRACE_S, less than it).
    async with Shutdown("bridge") as shutdown, AsyncExitStack() as stack:
        stop = shutdown.requested
        reached = await shutdown.unless_requested(
            stack.enter_async_context(
                reach_core(
                    settings, create=True, announce="bridge", http=HttpOptions.from_args(args)
                )
            )
        )
        if reached is None:
            return
        journal = Journal(settings.paths.home, args.consumer)
        journal.acquire()
        try:
            ident = await reached.calls.call("Identity", pb.IdentityRequest(), timeout=30)
            how = "hosting the core on" if reached.embedded else "relaying to"
            print(
                f"cone bridge: inbox {ident.inbox_id} ({ident.address}) on {ident.network}, "
                f"consumer {args.consumer!r}, {how} {settings.paths.socket}",
                file=sys.stderr,
                flush=True,
            )
            if args.alias is None:
                log.warning("no --alias: group messages never start a turn (DMs do)")
            identity = message_to_json(ident)
            bridge = Bridge(reached.calls, config, journal, identity)
            await bridge.run(stop)
        finally:
            journal.release()


def _show_parked(settings: Settings, consumer: str) -> int:
    from cone.bridge import read_parked

    for record in read_parked(settings.paths.home, consumer):
        print(json.dumps(record))
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the bridge until stopped; the exit code follows the error table in cone.errors."""
    configure_logging(args.verbose)
    from cone.startup import held_by_other, settings_from

    def body() -> int | None:
        _check(args)
        settings = settings_from(args)
        if args.parked:
            return _show_parked(settings, args.consumer)
        run_loop(_main(args, settings), hosting=not held_by_other(settings))
        return None

    return exit_code("bridge", body)


__all__ = ["run"]
