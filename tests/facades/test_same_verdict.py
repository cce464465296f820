"""The same verdict everywhere: boundary values of every parameter of every RPC, sent
through gRPC, JSON-RPC (`cone serve` hosting the core in-process) and MCP (`cone mcp`
relaying to it), are refused by all three or by none, naming the same field.

The boundary values come from the proto's own rules (buf.validate, read from the
descriptors): just inside and just outside each bound, a trailing newline after a
pattern, multi-byte text at a byte limit, and the cross-field rules. A call the rules
accept may still fail later for other reasons (an unknown conversation, a destination
that resolves nowhere): what is compared is "invalid_argument or not" and the field.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor
from mcp.client.session import ClientSession
from mcp.types import TextContent

from cone.client import ConeClient
from cone.errors import ConeError
from cone.rules import field_rules
from cone.schema import json_name, methods, tools
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import until

from ._mcp import mcp_session
from ._serve import RpcError, ServeProcess

pytestmark = pytest.mark.timeout(600)

HEX_CHARS = "0123456789abcdef" * 10


def _hex(n: int) -> str:
    return HEX_CHARS[:n]


# A request the rules accept, per method; each case changes one parameter of it.
BASE: dict[str, dict[str, Any]] = {
    "identity": {},
    "connect": {"to": "nobody"},
    "send": {"to": "nobody", "text": "hi", "key": "k"},
    "reply": {"conversationId": "ab", "text": "hi", "key": "k"},
    "receive": {},
    "ack": {"messageIds": ["ab"]},
    "requests": {},
    "accept": {"conversationId": "ab"},
    "block": {"conversationId": "ab"},
    "sync": {},
    "status": {},
    "attachment": {"messageId": "ab"},
    "peek": {},
    "conversations": {},
    "messages": {"conversationId": "ab"},
    "contacts": {},
    "unblock": {"conversationId": "ab"},
    "createGroup": {"members": ["nobody"], "key": "g"},
    "members": {"conversationId": "ab"},
    "addMembers": {"conversationId": "ab", "members": ["nobody"]},
    "removeMembers": {"conversationId": "ab", "members": ["nobody"]},
    "leaveGroup": {"conversationId": "ab"},
    "updateGroup": {"conversationId": "ab", "name": "n"},
    "revokeInstallations": {"installationIds": ["ab"]},
    "requestPreview": {"conversationId": "ab"},
    "resolve": {"to": "nobody"},
}
# Parameters that stand in for one another: a case on one drops the others.
EXCLUSIVE: dict[str, set[str]] = {
    "send": {"text", "markdown", "data", "reaction", "attachment"},
    "reply": {"text", "markdown", "data", "reaction", "attachment"},
    "revokeInstallations": {"installationIds", "allExceptThis"},
    "updateGroup": {"name", "description", "imageUrl"},
}
# Values a member of a nested object needs when another member is varied.
NESTED_BASE: dict[str, dict[str, Any]] = {
    "Reaction": {"messageId": "ab", "emoji": "x"},
    "OutgoingAttachment": {"filename": "f", "mimeType": "a/b", "data": ""},
}
# Parameters the JSON form carries differently from the proto.
_DATA_FIELDS = {"data_json"}


@dataclass(frozen=True)
class Case:
    """One request and the field the rules refuse (None: they accept it)."""

    method: str
    params: dict[str, Any]
    refused: str | None
    why: str


def _string_values(fd: FieldDescriptor, rules: Any) -> list[tuple[Any, bool, str]]:
    """(value, accepted, why) for a string field, from its rules."""
    s = rules.string
    out: list[tuple[Any, bool, str]] = []
    if s.HasField("pattern"):
        if s.pattern == "^[0-9a-f]{2,128}$":
            out += [
                (_hex(2), True, "shortest hex"),
                (_hex(128), True, "longest hex"),
                (_hex(1), False, "hex too short"),
                (_hex(129), False, "hex too long"),
                ("AB", False, "upper-case hex"),
                ("ab\n", False, "hex with a trailing newline"),
            ]
        else:
            lead = "a"
            out += [
                (lead, True, "one character"),
                (lead * 64, True, "64 characters"),
                (lead * 65, False, "65 characters"),
                (lead + "\n", False, "a trailing newline"),
                ("default\n", False, "a trailing newline"),
                ("é", False, "outside the pattern's letters"),
                ("-a", False, "a bad first character"),
            ]
        return out
    if s.HasField("max_bytes"):
        n = s.max_bytes
        return [
            ("é" * (n // 2), True, f"{n} bytes of two-byte characters"),
            ("é" * (n // 2) + "a", False, f"{n + 1} bytes"),
            ("a" * (n - 1) + "\n", True, "a trailing newline at the limit"),
        ]
    if s.HasField("contains"):
        return [
            ("a/b", True, "contains /"),
            ("a/" + "é" * 254, True, "256 characters"),
            ("a/" + "b" * 255, False, "257 characters"),
            ("png", False, "no /"),
        ]
    if s.HasField("max_len"):
        n = s.max_len
        if fd.name == "cursor":  # the core parses it: keep inside values parseable
            return [
                ("0" * (n - 129) + "." + "a" * 128, True, f"{n} characters"),
                ("0" * (n - 128) + "." + "a" * 128, False, f"{n + 1} characters"),
                ("", False, "empty"),
            ]
        out += [
            ("é" * n, True, f"{n} two-byte characters"),
            ("x" * (n - 1) + "\n", True, "a trailing newline at the limit"),
            ("x" * (n + 1), False, f"{n + 1} characters"),
        ]
        if fd.name == "emoji":
            out.append(("👍" * n, True, f"{n} four-byte characters"))
    if rules.required:
        out.append(("", False, "empty"))
    return out


def _integer_values(rules: Any) -> list[tuple[Any, bool, str]]:
    r = rules.uint32
    low = r.gte if r.HasField("gte") else 0
    out: list[tuple[Any, bool, str]] = [(low, True, "the minimum")]
    if low > 0:
        out.append((low - 1, False, "under the minimum"))
    if r.HasField("lte"):
        out += [(r.lte, True, "the maximum"), (r.lte + 1, False, "over the maximum")]
    return out


def _values(fd: FieldDescriptor, message: str) -> list[tuple[Any, bool, str]]:
    """Boundary values of one field, from its buf.validate rules."""
    rules = field_rules(message, fd.name)
    if fd.is_repeated:
        r = rules.repeated
        n = r.max_items
        item = _hex(2) if r.items.string.pattern else "nobody"
        out = [
            ([item] * n, True, f"{n} items"),
            ([item] * (n + 1), False, f"{n + 1} items"),
            ([], not rules.required and message != "RevokeInstallationsRequest", "no items"),
        ]
        if r.items.string.pattern:
            out.append(([item, "ab\n"], False, "an item with a trailing newline"))
        else:
            out.append(([item, ""], False, "an empty item"))
            out.append(([item, "x" * 257], False, "an item of 257 characters"))
        return out
    if fd.name in _DATA_FIELDS:
        n = rules.string.max_bytes
        return [
            ("é" * ((n - 2) // 2), True, f"{n} bytes of JSON"),
            ("é" * ((n - 2) // 2) + "a", False, f"{n + 1} bytes of JSON"),
            ({"nested": [1, 2.5, None, True]}, True, "any JSON value"),
        ]
    if fd.type == FieldDescriptor.TYPE_STRING:
        return _string_values(fd, rules)
    if fd.type in (FieldDescriptor.TYPE_UINT32,):
        return _integer_values(rules)
    if fd.type == FieldDescriptor.TYPE_UINT64:
        r = rules.uint64
        if r.HasField("lte"):
            return [
                (0, True, "zero"),
                (r.lte, True, "the maximum"),
                (r.lte + 1, False, "over the maximum"),
                (2**64 - 1, False, "the largest"),
            ]
        return [(0, True, "zero"), (2**64 - 1, True, "the largest")]
    if fd.type == FieldDescriptor.TYPE_BYTES:
        n = rules.bytes.max_len
        return [
            (base64.b64encode(bytes(n)).decode(), True, f"{n} bytes"),
            (base64.b64encode(bytes(n + 1)).decode(), False, f"{n + 1} bytes"),
        ]
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return [(True, True, "true"), (False, True, "false")]
    if fd.type == FieldDescriptor.TYPE_ENUM:
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", fd.enum_type.name).upper() + "_"
        names = [v.name.removeprefix(prefix).lower() for v in fd.enum_type.values if v.number]
        return [(name, True, f"enum {name}") for name in names]
    raise AssertionError(f"no boundary values for {fd.full_name}")


def _field_cases(method: str) -> list[Case]:
    desc = methods()[method].request_type.DESCRIPTOR
    base = BASE[method]
    out: list[Case] = []
    for fd in desc.fields:
        name = json_name(fd)
        group = EXCLUSIVE.get(method, set())
        drop = group - {name} if name in group else set()
        params = {k: v for k, v in base.items() if k not in drop}
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            inner = fd.message_type
            for sub in inner.fields:
                sub_name = json_name(sub)
                for value, ok, why in _values(sub, inner.name):
                    obj = {**NESTED_BASE[inner.name], sub_name: value}
                    path = f"{name}.{sub_name}"
                    out.append(Case(method, {**params, name: obj}, None if ok else path, why))
            continue
        for value, ok, why in _values(fd, desc.name):
            if method == "revokeInstallations" and name == "allExceptThis" and value is False:
                ok = False  # neither ids nor all: the rule names installationIds
                refused: str | None = "installationIds"
            else:
                refused = None if ok else name
            out.append(Case(method, {**params, name: value}, refused, why))
    return out


# The cross-field rules (CEL and oneofs), beyond what one parameter says.
CROSS: list[Case] = [
    Case("send", {"to": "nobody", "key": "k"}, "text", "no content"),
    Case(
        "send",
        {
            "to": "nobody",
            "key": "k",
            "reaction": {"messageId": "ab", "emoji": "x"},
            "replyTo": "ab",
        },
        "replyTo",
        "replyTo with a reaction",
    ),
    Case("send", {"to": "nobody", "key": "k", "text": "t", "replyTo": "ab"}, None, "replyTo"),
    Case("reply", {"conversationId": "ab", "key": "k"}, "text", "no content"),
    Case("reply", {"conversationId": "ab", "key": "k", "text": ""}, "text", "empty text only"),
    Case(
        "reply",
        {"conversationId": "ab", "key": "k", "text": "t", "markdown": "m"},
        "text",
        "text and markdown",
    ),
    Case("updateGroup", {"conversationId": "ab"}, "name", "nothing to change"),
    Case("revokeInstallations", {}, "installationIds", "neither ids nor all"),
    Case(
        "revokeInstallations",
        {"installationIds": ["ab"], "allExceptThis": True},
        "installationIds",
        "both ids and all",
    ),
    Case("revokeInstallations", {"allExceptThis": True}, None, "all but this one"),
]


def all_cases() -> list[Case]:
    bases = [Case(m, BASE[m], None, "the base request") for m in methods()]
    return bases + [c for m in methods() for c in _field_cases(m)] + CROSS


def test_the_cases_cover_every_parameter_of_every_method() -> None:
    cases = all_cases()
    assert set(BASE) == set(methods())
    for method in methods().values():
        props = method.params_schema["properties"]
        given = {k for c in cases if c.method == method.name for k in c.params}
        assert set(props) <= given, (method.name, set(props) - given)
        assert any(c.method == method.name and c.refused is None for c in cases), method.name
    assert sum(c.refused is not None for c in cases) > 100


Verdict = tuple[bool, str | None]


def _verdict_of(err: ConeError | None) -> Verdict:
    if err is None or err.reason != "invalid_argument":
        return (False, None)
    return (True, err.field)


async def _grpc(client: ConeClient, case: Case) -> Verdict:
    method = methods()[case.method]
    request = method.to_request(case.params)
    try:
        await client.call(method.rpc, request, timeout=method.timeout(request))
    except ConeError as err:
        return _verdict_of(err)
    return (False, None)


async def _jsonrpc(serve: ServeProcess, case: Case) -> Verdict:
    try:
        await serve.call(case.method, case.params, timeout=120)
    except RpcError as err:
        if err.data.get("reason") != "invalid_argument":
            return (False, None)
        assert err.code == -32602
        return (True, err.data.get("field"))
    return (False, None)


_MCP_DETAILS = re.compile(r"\((?P<reason>[a-z_]+)(?:; parameter (?P<field>[^;)]+))?[^()]*\)$")


async def _mcp(session: ClientSession, case: Case) -> Verdict:
    result = await session.call_tool(methods()[case.method].tool, case.params)
    if not result.is_error:
        return (False, None)
    (text,) = result.content
    assert isinstance(text, TextContent)
    found = _MCP_DETAILS.search(text.text)
    assert found is not None, text.text
    if found["reason"] != "invalid_argument":
        return (False, None)
    return (True, found["field"])


async def _one_message_pending(serve: ServeProcess, peer: Peer) -> None:
    """A message from `peer` pending in an accepted conversation: every receive and
    peek then answers at once, so a wait the rules accept (up to `waitMs` at its
    maximum) is answered rather than waited out."""
    contact = (await serve.call("connect", {"to": peer.address}))["contact"]
    await peer.sync()
    await peer.send(peer.conversation(bytes.fromhex(contact["conversationId"])), "pending")

    async def arrived() -> bool:
        return bool((await serve.call("peek"))["messages"])

    await until(arrived)


async def test_grpc_json_rpc_and_mcp_give_the_same_verdict(
    home: Path, devnet: str, alice: Peer
) -> None:
    cases = all_cases()
    async with ServeProcess(home, devnet) as serve:
        await serve.call("identity")  # serve now hosts the core and serves cone.sock
        await _one_message_pending(serve, alice)
        async with ConeClient(home / "cone.sock") as client, mcp_session(home, devnet) as mcp:
            gate = asyncio.Semaphore(6)

            async def one(case: Case) -> tuple[Case, list[Verdict]]:
                checks = [_grpc(client, case), _jsonrpc(serve, case)]
                if methods()[case.method].tool in tools():  # not every method is a tool
                    checks.append(_mcp(mcp, case))
                async with gate:
                    verdicts = await asyncio.gather(*checks)
                return case, list(verdicts)

            results = await asyncio.gather(*(one(c) for c in cases))
    wrong = []
    for case, verdicts in results:
        expected: Verdict = (case.refused is not None, case.refused)
        if any(v != expected for v in verdicts):
            shown = json.dumps(case.params)[:120]
            wrong.append(f"{case.method} {shown} ({case.why}): want {expected}, got {verdicts}")
    assert not wrong, "\n".join(wrong)


async def test_mcp_hosting_the_core_itself_refuses_by_the_same_rules(
    home: Path, devnet: str
) -> None:
    async with mcp_session(home, devnet) as session:  # no daemon: mcp embeds the core
        for case in [*CROSS[:2], Case("receive", {"consumer": "default\n"}, "consumer", "")]:
            assert await _mcp(session, case) == (True, case.refused)


async def test_a_streamed_call_is_checked_by_the_same_rules(home: Path, devnet: str) -> None:
    async with DaemonProcess(home, devnet) as daemon:
        with pytest.raises(ConeError) as refused:
            async for _ in daemon.client.backup(""):
                pass
        assert (refused.value.reason, refused.value.field) == ("invalid_argument", "passphrase")
