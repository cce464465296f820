"""A receive batch at the byte budget fits every wire, with JSON's worst escaping.

Pure arithmetic on the real encoders (the proto, the JSON-RPC framing, the MCP SDK's
models), fed by a fake caller: the transports themselves are exercised by the tests
that send large messages through a daemon (tests/core/test_large_batches.py).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cone import limits
from cone.facades.jsonrpc import MAX_LINE_BYTES, Relay
from cone.facades.jsonrpc._framing import encode
from cone.facades.mcp._tools import call_tool
from cone.rules import field_rules
from cone.store import inbox
from conepb.v1 import cone_pb2 as pb

#: gRPC's default receive limit in every language: a polyglot client needs no option.
GRPC_DEFAULT_RECEIVE_BYTES = 4 * 1024 * 1024
_HEX = "0123456789abcdef"


def _message(i: int, text: str, fallback: str | None = None) -> pb.Message:
    m = pb.Message(
        message_id=f"{i:0128x}",  # the longest id the protocol allows
        conversation_id="c" * 128,
        conversation_type=pb.CONVERSATION_TYPE_GROUP,
        sender_inbox_id="a" * 64,
        content_type="xmtp.org/text:1.0",
        text=text,
        reply_to="b" * 128,
        sequence=2**62,
        deliveries=2**31,
    )
    m.sent_at.FromNanoseconds(2**62)
    if fallback is not None:
        m.fallback = fallback
    return m


def _size(m: pb.Message) -> int:
    """What the store charges (inbox.MESSAGE_SIZE) for the same fields."""
    fields = [m.message_id, m.conversation_id, m.sender_inbox_id, m.content_type, m.text]
    fields += [m.reply_to, m.fallback]
    return inbox.MESSAGE_OVERHEAD_BYTES + sum(len(f.encode()) for f in fields)


def _fill(budget: int, piece: str, fallback: bool = False) -> pb.ReceiveResponse:
    """Messages of `piece` repeated (up to 64 KiB each, split between text and
    fallback if asked), as many as the budget takes."""
    out = pb.ReceiveResponse(more=True)
    used = 0
    for i in range(field_rules("ReceiveRequest", "limit").uint32.lte):
        bare = _size(_message(i, "", "" if fallback else None))
        n = min(budget - used - bare, 64 * 1024) // len(piece.encode())
        if n <= 0:
            break
        half = n // 2 if fallback else n
        m = _message(i, piece * half, piece * (n - half) if fallback else None)
        used += _size(m)
        out.messages.append(m)
    return out


class _Fixed:
    """A caller that answers every call with one prepared response."""

    def __init__(self, response: Any) -> None:
        self.response = response

    async def call(
        self, rpc: str, request: Any, timeout: float | None = None, *, long_poll: bool = False
    ) -> Any:
        return self.response


async def _wire_sizes(response: pb.ReceiveResponse) -> tuple[int, int, int]:
    """(gRPC message, JSON-RPC answer line, MCP answer line) in bytes."""
    result = await Relay(_Fixed(response))("receive", {})
    jsonrpc = len(encode({"jsonrpc": "2.0", "id": 2**53, "result": result}))
    tool = await call_tool(_Fixed(response), "cone_receive", {})
    assert not tool.is_error
    answer = types.JSONRPCResponse(
        jsonrpc="2.0",
        id=2**53,
        result=tool.model_dump(by_alias=True, mode="json", exclude_none=True),
    )
    mcp = len(answer.model_dump_json(by_alias=True, exclude_unset=True).encode()) + 1
    return response.ByteSize(), jsonrpc, mcp


# The worst escapes: a control character is 6 bytes in JSON (`\u0001`), 13 through MCP
# (escaped again inside the text content, and once more as structured content); a
# quote or backslash doubles; non-ASCII grows at most 3x (ASCII-only JSON-RPC output).
_PIECES = ["\x01", '"', "\\", "\u00e9", "\U0001f600", "\u2028", "a"]


@pytest.mark.parametrize("piece", _PIECES, ids=[f"U+{ord(p):04X}" for p in _PIECES])
async def test_a_batch_at_the_budget_fits_every_wire(piece: str) -> None:
    for fallback in (False, True):
        batch = _fill(limits.RECEIVE_BATCH_BYTES, piece, fallback)
        assert sum(_size(m) for m in batch.messages) <= limits.RECEIVE_BATCH_BYTES
        grpc_bytes, jsonrpc_bytes, mcp_bytes = await _wire_sizes(batch)
        assert grpc_bytes < GRPC_DEFAULT_RECEIVE_BYTES
        assert jsonrpc_bytes <= MAX_LINE_BYTES
        assert mcp_bytes <= MAX_LINE_BYTES


@pytest.mark.parametrize("piece", _PIECES, ids=[f"U+{ord(p):04X}" for p in _PIECES])
async def test_one_message_of_the_largest_stored_size_fits_every_wire(piece: str) -> None:
    bare = _message(0, "")
    n = (limits.MESSAGE_MAX_BYTES - _size(bare) + inbox.MESSAGE_OVERHEAD_BYTES) // len(
        piece.encode()
    )
    batch = pb.ReceiveResponse(messages=[_message(0, piece * n)], more=True)
    grpc_bytes, jsonrpc_bytes, mcp_bytes = await _wire_sizes(batch)
    assert grpc_bytes < GRPC_DEFAULT_RECEIVE_BYTES
    assert jsonrpc_bytes <= MAX_LINE_BYTES
    assert mcp_bytes <= MAX_LINE_BYTES


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=8))
async def test_any_text_at_the_budget_fits_every_wire(pieces: list[str]) -> None:
    piece = "".join(pieces)
    batch = _fill(limits.RECEIVE_BATCH_BYTES, piece)
    grpc_bytes, jsonrpc_bytes, mcp_bytes = await _wire_sizes(batch)
    assert grpc_bytes < GRPC_DEFAULT_RECEIVE_BYTES
    assert jsonrpc_bytes <= MAX_LINE_BYTES
    assert mcp_bytes <= MAX_LINE_BYTES
