"""A send answers at the first sign of publication; kill -9 on either side of it.

The new path's failpoints (cone/core/publication.py): `send_prepared`, the message
stored in libxmtp and not yet published; `send_answered`, the send answered at the
message stream's echo while libxmtp still reads the conversation back, the key not
yet settled. A kill -9 at either leaves the key to the restarted daemon, which
publishes exactly one message with the first payload, under the id already answered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import Devnet
from cone.errors import ConeError
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import until

# libxmtp reads a conversation back with this call after publishing into it.
READ_BACK = "QueryGroupMessages"


async def _send(daemon: DaemonProcess, **kw: object) -> pb.SendResponse:
    return await daemon.client.call("Send", pb.SendRequest(**kw))


def _failpoint(home: Path, name: str) -> tuple[dict[str, str], Path]:
    marker = home.parent / f"{home.name}.{name}"
    return {"CONE_FAILPOINT": name, "CONE_FAILPOINT_FILE": str(marker)}, marker


async def _one_message_then(alice: Peer, daemon: DaemonProcess, conversation_id: str) -> list[str]:
    """alice's texts from cone in the conversation, once a later message has arrived
    (anything before it has arrived too): exactly what the key produced, then "after"."""
    last = await _send(daemon, to=conversation_id, text="after", key="after")

    async def arrived() -> list[object]:
        got = await alice.received(bytes.fromhex(conversation_id))
        return got if any(bytes(m.id).hex() == last.message_id for m in got) else []

    return [ffi.decode_text(m.content) for m in await until(arrived)]


async def test_a_send_answers_while_libxmtp_still_reads_the_conversation_back(
    home: Path, devnet_node: Devnet, alice: Peer
) -> None:
    env, marker = _failpoint(home, "send_answered")
    release = home.parent / f"{home.name}.release"
    env["CONE_FAILPOINT_RELEASE"] = str(release)
    async with DaemonProcess(home, devnet_node.url, extra_env=env) as daemon:
        contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
        cid = contact.conversation_id
        # The read-back takes 3 s; the echo of the publication comes on the stream at once.
        devnet_node.faults.set_latency(READ_BACK, 3)
        sent = await _send(daemon, to=cid, text="answered early", key="e1")
        assert sent.published
        # Answered at the echo: the rest of libxmtp's call is held at the failpoint,
        # which only a publication answered before that call returned reaches.

        async def held() -> bool:
            return marker.exists()

        await until(held)
        # The key settled at the answer: a retry gets the same id, history shows it.
        again = await _send(daemon, to=cid, text="other", key="e1")
        assert (again.message_id, again.deduplicated) == (sent.message_id, True)
        assert not (await daemon.status()).outbox
        page = await daemon.client.call("Messages", pb.MessagesRequest(conversation_id=cid))
        assert [m.message_id for m in page.messages] == [sent.message_id]
        devnet_node.faults.set_latency(READ_BACK, 0)
        release.touch()
        assert await _one_message_then(alice, daemon, cid) == ["answered early", "after"]


async def test_a_kill9_after_prepare_before_publication_sends_the_key_once(
    home: Path, devnet: str, alice: Peer
) -> None:
    env, marker = _failpoint(home, "send_prepared")
    async with DaemonProcess(home, devnet, extra_env=env) as daemon:
        contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
        cid = contact.conversation_id
        call = asyncio.create_task(_send(daemon, to=cid, text="first payload", key="p1"))

        await daemon.kill9_at_failpoint(marker)
        with pytest.raises(ConeError):
            await call
        await daemon.restart_without_failpoint()
        again = await _send(daemon, to=cid, text="regenerated", key="p1")
        assert again.deduplicated and again.published
        assert await _one_message_then(alice, daemon, cid) == ["first payload", "after"]


async def test_a_kill9_after_the_answer_before_the_settle_keeps_the_answered_id(
    home: Path, devnet_node: Devnet, alice: Peer
) -> None:
    env, marker = _failpoint(home, "send_answered")
    async with DaemonProcess(home, devnet_node.url, extra_env=env) as daemon:
        contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
        cid = contact.conversation_id
        devnet_node.faults.set_latency(READ_BACK, 3)  # the answer comes at the echo
        sent = await _send(daemon, to=cid, text="first payload", key="a1")
        assert sent.published

        await daemon.kill9_at_failpoint(marker)
        devnet_node.faults.set_latency(READ_BACK, 0)
        await daemon.restart_without_failpoint()
        again = await _send(daemon, to=cid, text="regenerated", key="a1")
        assert (again.message_id, again.deduplicated, again.published) == (
            sent.message_id,
            True,
            True,
        )
        texts = await _one_message_then(alice, daemon, cid)
        assert texts == ["first payload", "after"]
