"""Send and Reply: one message per key, conflicts, and wire content other apps read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.core import content
from cone.devnet import Devnet
from cone.errors import ConeError, Conflict, FailedPrecondition, InvalidArgument
from conepb.v1 import cone_pb2 as pb
from support.daemons import BACKENDS, DaemonProcess
from support.peers import Peer
from support.shared import *  # noqa: F403 (the fixtures that share a devnet and daemons)
from support.waiting import receive_n, until

# One devnet and one daemon per backend for the module (tests/support/shared.py):
# each test has its own peers, keys and conversations.
pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _send(daemon: DaemonProcess, **kw: object) -> pb.SendResponse:
    return await daemon.client.call("Send", pb.SendRequest(**kw))


async def _peer_messages(peer: Peer, conversation_id: str) -> list[object]:
    return await peer.received(bytes.fromhex(conversation_id))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_settled_key_returns_its_original_id_even_with_new_text(
    daemon: DaemonProcess, alice: Peer
) -> None:
    first = await _send(daemon, to=alice.address, text="the first answer", key="turn-1")
    assert first.published and not first.deduplicated
    again = await _send(daemon, to=alice.address, text="a regenerated answer", key="turn-1")
    assert (again.message_id, again.deduplicated) == (first.message_id, True)
    await alice.sync()
    got = await until(lambda: _peer_messages(alice, first.conversation_id))
    assert [ffi.decode_text(m.content) for m in got] == ["the first answer"]


async def test_reusing_a_key_for_another_destination_or_kind_fails(
    daemon: DaemonProcess, alice: Peer, devnet: str, tmp_path: object
) -> None:
    from pathlib import Path

    bob = await Peer.create(devnet, Path(str(tmp_path)), "bob")
    await _send(daemon, to=alice.address, text="hi", key="reused")
    with pytest.raises(Conflict) as err:
        await _send(daemon, to=bob.address, text="hi", key="reused")
    assert err.value.reason == "key_conflict"
    with pytest.raises(Conflict):
        await _send(daemon, to=alice.address, data_json='{"a": 1}', key="reused")
    with pytest.raises(InvalidArgument) as bad:
        await _send(daemon, to=alice.address, text="hi", key="")
    assert bad.value.field == "key"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_raw_libxmtp_peer_reads_text_replies_and_data(
    daemon: DaemonProcess, alice: Peer
) -> None:
    text = await _send(daemon, to=alice.address, text="plain words", key="t")
    reply = await _send(daemon, to=alice.address, text="a reply", key="r", reply_to=text.message_id)
    data = await _send(daemon, to=alice.address, data_json='{"n": [1, 2]}', key="d")
    await alice.sync()

    async def all_three() -> list[object]:
        got = await _peer_messages(alice, text.conversation_id)
        return got if len(got) == 3 else []

    by_id = {bytes(m.id).hex(): m for m in await until(all_three)}
    assert ffi.decode_text(by_id[text.message_id].content) == "plain words"
    decoded_reply = ffi.decode_reply(by_id[reply.message_id].content)
    assert decoded_reply.reference == text.message_id
    assert decoded_reply.content.content == b"a reply"
    raw = content.decode(by_id[data.message_id].content)
    assert json.loads(raw.data_json or "") == {"n": [1, 2]}


async def test_cone_reads_a_peers_reply_with_reply_to(daemon: DaemonProcess, alice: Peer) -> None:
    sent = await _send(daemon, to=alice.address, text="question", key="q")
    await alice.sync()
    conv = alice.conversation(bytes.fromhex(sent.conversation_id))
    ctype, payload = content.encode(text="answer", reply_to=sent.message_id)
    assert ctype == content.REPLY
    await conv.send(payload, ffi.FfiSendMessageOpts(should_push=True))

    async def one() -> list[pb.Message]:
        return list((await daemon.client.receive(wait_ms=1000)).messages)

    (msg,) = await until(one)
    assert (msg.text, msg.reply_to, msg.content_type) == ("answer", sent.message_id, content.REPLY)


#: The devnet method a conversation's messages are published with, by backend.
PUBLISH = {"v3": "SendGroupMessages", "d14n": "PublishClientEnvelopes"}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_failing_publication_waits_in_the_outbox_and_delivers_later(
    daemon: DaemonProcess, alice: Peer, devnet_node: Devnet, backend: str
) -> None:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    devnet_node.faults.fail_next(PUBLISH[backend], 1000, grpc.StatusCode.RESOURCE_EXHAUSTED)
    held = await _send(daemon, to=contact.conversation_id, text="held back", key="later")
    assert not held.published and held.retry_after_ms > 0
    status = await daemon.client.call("Status", pb.StatusRequest())
    (entry,) = status.outbox
    assert (entry.key, entry.state, entry.attempts) == ("later", "failing", 1)
    assert entry.last_error
    devnet_node.faults.clear()

    async def delivered() -> list[object]:
        return await _peer_messages(alice, contact.conversation_id)

    (got,) = await until(delivered)
    assert bytes(got.id).hex() == held.message_id
    assert ffi.decode_text(got.content) == "held back"
    again = await _send(daemon, to=contact.conversation_id, text="held back", key="later")
    assert (again.message_id, again.deduplicated, again.published) == (held.message_id, True, True)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_kill9_mid_send_delivers_the_key_exactly_once_with_its_first_payload(
    daemon: DaemonProcess, alice: Peer, devnet_node: Devnet, backend: str
) -> None:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    devnet_node.faults.set_latency(PUBLISH[backend], 60)  # the publication hangs in flight
    call = asyncio.create_task(
        _send(daemon, to=contact.conversation_id, text="first payload", key="k9")
    )

    async def in_flight() -> bool:
        status = await daemon.client.call("Status", pb.StatusRequest())
        return [o.key for o in status.outbox] == ["k9"]

    await until(in_flight)
    daemon.kill9()
    with pytest.raises(ConeError):
        await call
    devnet_node.faults.set_latency(PUBLISH[backend], 0)
    await daemon.restart()
    again = await _send(daemon, to=contact.conversation_id, text="regenerated", key="k9")
    assert again.deduplicated

    async def settled() -> bool:
        status = await daemon.client.call("Status", pb.StatusRequest())
        return not status.outbox

    await until(settled)
    # One more message after it: once alice has that one, anything earlier has arrived.
    last = await _send(daemon, to=contact.conversation_id, text="after", key="k10")

    async def both() -> list[object]:
        got = await _peer_messages(alice, contact.conversation_id)
        return got if any(bytes(m.id).hex() == last.message_id for m in got) else []

    texts = [ffi.decode_text(m.content) for m in await until(both)]
    assert texts == ["first payload", "after"]
    assert bytes((await until(both))[0].id).hex() == again.message_id


async def test_a_settled_key_still_deduplicates_after_the_conversation_is_blocked(
    daemon: DaemonProcess, alice: Peer
) -> None:
    first = await _send(daemon, to=alice.address, text="before the block", key="blocked-1")
    await daemon.client.call("Block", pb.BlockRequest(conversation_id=first.conversation_id))
    again = await daemon.client.call(
        "Reply", pb.ReplyRequest(conversation_id=first.conversation_id, text="x", key="blocked-1")
    )
    assert (again.message_id, again.deduplicated) == (first.message_id, True)
    with pytest.raises(FailedPrecondition) as err:
        await daemon.client.call(
            "Reply",
            pb.ReplyRequest(conversation_id=first.conversation_id, text="x", key="blocked-2"),
        )
    assert err.value.reason == "not_accepted"


async def test_a_failing_conversation_never_holds_back_another(
    daemon: DaemonProcess, alice: Peer, devnet: str, devnet_node: Devnet, tmp_path: object
) -> None:
    from pathlib import Path

    bob = await Peer.create(devnet, Path(str(tmp_path)), "bob")
    to_alice = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    to_bob = (await daemon.client.call("Connect", pb.ConnectRequest(to=bob.address))).contact
    devnet_node.faults.fail_group(bytes.fromhex(to_alice.conversation_id), 1000)
    stuck = asyncio.create_task(
        _send(daemon, to=to_alice.conversation_id, text="stuck for now", key="a1")
    )
    # The other conversation sends and receives as usual meanwhile.
    for i in range(3):
        sent = await _send(daemon, to=to_bob.conversation_id, text=f"to bob {i}", key=f"to-bob-{i}")
        assert sent.published
    assert not (await stuck).published
    await bob.sync()
    bob_dm = bob.conversation(bytes.fromhex(to_bob.conversation_id))
    await bob.send(bob_dm, "bob answers")
    (answer,) = await receive_n(daemon.client, 1)
    assert answer.text == "bob answers"
    status = await daemon.client.call("Status", pb.StatusRequest())
    assert [(e.key, e.state) for e in status.outbox] == [("a1", "failing")]
    devnet_node.faults.clear()

    async def delivered() -> list[object]:
        return await _peer_messages(alice, to_alice.conversation_id)

    (got,) = await until(delivered)
    assert ffi.decode_text(got.content) == "stuck for now"


async def test_a_kill9_right_after_a_group_commit_publishes_each_of_its_keys_once(
    home: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    # Three conversations send at once; the failpoint gathers their three claims into
    # one group commit and stops the store's thread right after it, before any send
    # learns its claim is durable: the daemon dies there.
    peers = [alice] + [await Peer.create(devnet, tmp_path, name) for name in ("bob", "carol")]
    marker_file = home.parent / f"{home.name}.failpoint"
    env = {
        "CONE_FAILPOINT": "group_commit",
        "CONE_FAILPOINT_GROUP": str(len(peers)),
        "CONE_FAILPOINT_FILE": str(marker_file),
    }
    async with DaemonProcess(home, devnet, extra_env=env) as daemon:
        dms = [
            (await daemon.client.call("Connect", pb.ConnectRequest(to=p.address))).contact
            for p in peers
        ]
        calls = [
            asyncio.create_task(
                _send(daemon, to=dm.conversation_id, text=f"first payload {i}", key=f"g{i}")
            )
            for i, dm in enumerate(dms)
        ]

        await daemon.kill9_at_failpoint(marker_file)
        for call in calls:
            with pytest.raises(ConeError):
                await call
        await daemon.restart_without_failpoint()
        # Every claim of the group survived: the keys resume and keep their first payload.
        status = await daemon.status()
        assert {o.key for o in status.outbox} <= {"g0", "g1", "g2"}
        again = [
            await _send(daemon, to=dm.conversation_id, text="regenerated", key=f"g{i}")
            for i, dm in enumerate(dms)
        ]
        assert all(a.deduplicated and a.published for a in again)

        async def settled() -> bool:
            return not (await daemon.status()).outbox

        await until(settled)
        lasts = [
            await _send(daemon, to=dm.conversation_id, text="after", key=f"after{i}")
            for i, dm in enumerate(dms)
        ]
    for i, (peer, dm) in enumerate(zip(peers, dms, strict=True)):

        async def arrived(
            peer: Peer = peer, cid: str = dm.conversation_id, last: str = lasts[i].message_id
        ) -> list[object]:
            got = await _peer_messages(peer, cid)
            return got if any(bytes(m.id).hex() == last for m in got) else []

        got = await until(arrived)
        assert [ffi.decode_text(m.content) for m in got] == [f"first payload {i}", "after"]
        assert bytes(got[0].id).hex() == again[i].message_id


async def test_sends_at_once_in_one_conversation_arrive_once_each_failing_or_not(
    daemon: DaemonProcess, alice: Peer, devnet_node: Devnet
) -> None:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    cid = contact.conversation_id
    at_once = [f"once-{i}" for i in range(8)]
    sent = await asyncio.gather(*(_send(daemon, to=cid, text=k, key=k) for k in at_once))
    assert all(s.published for s in sent)
    after = await _send(daemon, to=cid, text="after", key="once-after")
    # While the node refuses the conversation, sends at once wait in the outbox, their
    # messages queued in libxmtp; once it takes them again, each goes out once.
    devnet_node.faults.fail_group(bytes.fromhex(cid), 1000)
    failing = [f"failing-{i}" for i in range(2)]
    waited = await asyncio.gather(*(_send(daemon, to=cid, text=k, key=k) for k in failing))
    assert not any(w.published for w in waited)
    devnet_node.faults.clear()

    async def settled() -> bool:
        return not (await daemon.client.call("Status", pb.StatusRequest())).outbox

    await until(settled)  # every key published and settled: nothing more goes out
    got: list[Any] = await until(lambda: _peer_messages(alice, cid))
    keys = [content.decode(m.content).send_key for m in got]
    assert sorted(keys) == sorted([*at_once, "once-after", *failing])
    ids = {m.id.hex(): k for m, k in zip(got, keys, strict=True)}
    assert {ids[s.message_id] for s in [*sent, after, *waited]} == set(keys)
    # A send made after others were answered comes after them on the node.
    by_node = [content.decode(m.content).send_key for m in sorted(got, key=_sequence)]
    assert set(by_node[:8]) == set(at_once) and by_node[8] == "once-after"


def _sequence(message: Any) -> int:
    """Where the node put a message in its conversation."""
    return int(message.sequence_id)
