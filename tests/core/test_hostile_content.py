"""A hostile peer's content: each message that cannot be read enters the inbox as
unreadable, with its reason; nothing stalls, and a control peer's messages keep flowing."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from facades._serve import ServeProcess
from hypothesis import given, settings
from hypothesis import strategies as st
from xmtp_bindings import xmtpv3 as ffi

from cone.core import content
from conepb.v1 import cone_pb2 as pb
from conepb.xmtpcontent import content_pb2
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import receive_n, until


def _envelope(authority: str, type_id: str, body: bytes, **fields: Any) -> bytes:
    env = content_pb2.EncodedContent(
        type=content_pb2.ContentTypeId(
            authority_id=authority, type_id=type_id, version_major=1, version_minor=0
        ),
        content=body,
        **fields,
    )
    return env.SerializeToString()


def _bomb(inflated: int) -> bytes:
    """Raw deflate of `inflated` zero bytes (about 1/1000 of that on the wire)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(1 << 20)
    out = [packer.compress(chunk) for _ in range(inflated >> 20)]
    return b"".join(out) + packer.flush()


def _hostile() -> list[tuple[str, bytes, str]]:
    """(label, envelope bytes, what the unreadable reason says), one per attack."""
    return [
        ("deep", _envelope("cone.chat", "data", b"[" * 100_000 + b"]" * 100_000), "nested deeper"),
        (
            "bomb",
            _envelope(
                "xmtp.org", "text", _bomb(256 << 20), compression=content_pb2.COMPRESSION_DEFLATE
            ),
            "inflates to more than",
        ),
        ("infinite", _envelope("cone.chat", "data", b'{"n":1e999}'), "out of range"),
        ("surrogate", _envelope("cone.chat", "data", b'["\\ud800"]'), "lone surrogate"),
        ("nan", _envelope("cone.chat", "data", b'{"n":NaN}'), "NaN"),
        ("garbage", b"\xff\x00 not a protobuf \xff" * 10, "not an XMTP content envelope"),
        ("long-type", _envelope("x" * 100_000, "text", b"hi"), "content type longer than"),
        # 700 kB of invalid UTF-8: each byte is kept as U+FFFD, three bytes each.
        ("expanding", _envelope("xmtp.org", "text", b"\xff" * 700_000), "once decoded"),
        (
            "broken-deflate",
            _envelope(
                "xmtp.org", "text", b"\x00" * 64, compression=content_pb2.COMPRESSION_DEFLATE
            ),
            "does not inflate",
        ),
    ]


async def _send_raw(conversation: Any, payload: bytes) -> None:
    await conversation.send(payload, ffi.FfiSendMessageOpts(should_push=True))


async def _contact(daemon: DaemonProcess, peer: Peer) -> Any:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
    await peer.sync()
    return peer.conversation(bytes.fromhex(contact.conversation_id))


async def test_hostile_content_from_an_accepted_peer_and_a_stranger_stalls_nothing(
    daemon: DaemonProcess, devnet: str, tmp_path: Path, alice: Peer
) -> None:
    mallory = await Peer.create(devnet, tmp_path, "mallory")
    stranger = await Peer.create(devnet, tmp_path, "stranger")
    control = await _contact(daemon, alice)
    hostile = await _contact(daemon, mallory)
    ident = await daemon.client.identity()
    mine = stranger.identifier()
    stranger_dm = await stranger.client.conversations().find_or_create_dm_by_identity(
        mine.__class__(identifier=ident.address, identifier_kind=mine.identifier_kind),
        ffi.FfiCreateDmOptions(message_disappearing_settings=None),
    )
    hostile_cases = _hostile()

    for label, payload, _ in hostile_cases:
        await _send_raw(hostile, payload)
        await _send_raw(stranger_dm, payload)
        await alice.send(control, f"control after {label}")
    await mallory.send(hostile, "mallory can still talk")

    got = await receive_n(daemon.client, 2 * len(hostile_cases) + 1)
    controls = [m.text for m in got if m.sender_inbox_id == alice.inbox_id]
    assert controls == [f"control after {label}" for label, _, _ in hostile_cases]
    from_mallory = [m for m in got if m.sender_inbox_id == mallory.inbox_id]
    assert len(from_mallory) == len(hostile_cases) + 1
    for m, (label, _, reason) in zip(from_mallory, hostile_cases, strict=False):
        assert m.HasField("unreadable"), label
        assert reason in m.unreadable, (label, m.unreadable)
        assert m.WhichOneof("content") is None, label
    assert from_mallory[-1].text == "mallory can still talk"

    # The stranger's messages wait as a request, all of them, without stopping anything.
    async def held() -> list[pb.ConversationRequest]:
        answer = await daemon.client.call("Requests", pb.RequestsRequest())
        return [r for r in answer.requests if r.pending_messages == len(hostile_cases)]

    (request,) = await until(held)
    await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=request.conversation_id))
    everything = await receive_n(daemon.client, 3 * len(hostile_cases) + 1)
    assert sum(1 for m in everything if m.HasField("unreadable")) == 2 * len(hostile_cases)

    # Every interface carries every one of them: JSON-RPC included.
    async with ServeProcess(daemon.home, devnet) as serve:
        answer = await serve.call("receive", {"limit": 100, "waitMs": 0})
    assert len(answer["messages"]) == 3 * len(hostile_cases) + 1
    json.dumps(answer, allow_nan=False)

    status = await daemon.client.call("Status", pb.StatusRequest())
    assert status.ingest_healed == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_decode_never_raises_on_any_bytes(raw: bytes) -> None:
    decoded = content.decode(raw)
    if decoded.data_json is not None:
        json.loads(decoded.data_json)
    for text in (decoded.text, decoded.data_json, decoded.fallback, decoded.unreadable):
        if text is not None:
            text.encode("utf-8")  # every interface can carry it


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=512))
def test_data_of_any_text_is_carried_or_marked_unreadable(raw: str) -> None:
    decoded = content.decode(_envelope("cone.chat", "data", raw.encode()))
    assert (decoded.data_json is None) != (decoded.unreadable is None)
    if decoded.data_json is not None:
        assert json.loads(decoded.data_json) == json.loads(raw)
        json.dumps(json.loads(decoded.data_json), allow_nan=False)
