"""Reply with `ackMessageIds`: the reply's key and the acknowledgement commit together.

Against a real daemon process, the devnet and a raw libxmtp peer: acknowledged with
the claim (and only then), idempotent on retry, nothing acknowledged by a refused
reply, acknowledged by a reply whose publication waits in the outbox, and both kept
by a `kill -9` right after their one transaction.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import Devnet
from cone.errors import ConeError, Conflict, InvalidArgument, NotFound
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.shared import *  # noqa: F403 (the fixtures that share a devnet and daemons)
from support.waiting import receive_n, until

# One devnet and one daemon for the module (tests/support/shared.py): each test reads
# only its own conversation's messages, for consumers every test uses.
pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _asked(daemon: DaemonProcess, peer: Peer, *texts: str) -> tuple[str, list[str]]:
    """The peer's DM with the daemon (accepted) and the ids of `texts` it sent there,
    once they are pending for the consumer `turns`."""
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
    await peer.sync()
    dm = peer.conversation(bytes.fromhex(contact.conversation_id))
    for text in texts:
        await peer.send(dm, text)
    cid = contact.conversation_id
    got = await receive_n(daemon.client, len(texts), consumer="turns", conversation=cid)
    return cid, [m.message_id for m in got]


async def _reply(daemon: DaemonProcess, **kw: object) -> pb.ReplyResponse:
    return await daemon.client.call("Reply", pb.ReplyRequest(**kw))


async def _pending(daemon: DaemonProcess, consumer: str, conversation_id: str) -> list[str]:
    batch = await daemon.client.receive(consumer=consumer, limit=1000, wait_ms=0)
    return [m.message_id for m in batch.messages if m.conversation_id == conversation_id]


async def _texts_through(peer: Peer, conversation_id: str, last: str) -> list[str]:
    """The daemon's texts in the conversation as the peer has them, once the one with
    id `last` (sent after the others) has arrived: nothing earlier is still on its way."""

    async def arrived() -> list[object]:
        got = await peer.received(bytes.fromhex(conversation_id))
        return got if any(bytes(m.id).hex() == last for m in got) else []

    return [ffi.decode_text(m.content) for m in await until(arrived)]


async def test_a_reply_acknowledges_what_it_answers_and_a_retry_acknowledges_nothing_twice(
    daemon: DaemonProcess, alice: Peer
) -> None:
    cid, (q1, q2, q3) = await _asked(daemon, alice, "one", "two", "three")
    # An empty list acknowledges nothing: a plain reply.
    plain = await _reply(daemon, conversation_id=cid, text="noted", key="plain")
    assert plain.acknowledged == 0
    assert await _pending(daemon, "turns", cid) == [q1, q2, q3]

    first = await _reply(
        daemon,
        conversation_id=cid,
        text="the answer",
        key="reply:q2",
        ack_consumer="turns",
        ack_message_ids=[q1, q2, q2],
    )
    assert (first.published, first.deduplicated, first.acknowledged) == (True, False, 2)
    assert await _pending(daemon, "turns", cid) == [q3]
    assert await _pending(daemon, "other", cid) == [q1, q2, q3]  # consumers stay independent

    # The same key and the same list: the first answer, nothing new sent or acknowledged.
    again = await _reply(
        daemon,
        conversation_id=cid,
        text="a regenerated answer",
        key="reply:q2",
        ack_consumer="turns",
        ack_message_ids=[q1, q2],
    )
    assert (again.message_id, again.deduplicated, again.acknowledged) == (
        first.message_id,
        True,
        2,
    )
    assert await _pending(daemon, "turns", cid) == [q3]
    # The same key with another list: still one message; the ids it names are
    # acknowledged as Ack would (a message never handed to a consumer included).
    other = await _reply(
        daemon,
        conversation_id=cid,
        text="x",
        key="reply:q2",
        ack_consumer="fresh",
        ack_message_ids=[q3],
    )
    assert (other.message_id, other.deduplicated, other.acknowledged) == (
        first.message_id,
        True,
        1,
    )
    assert await _pending(daemon, "fresh", cid) == [q1, q2]
    assert await _pending(daemon, "turns", cid) == [q3]

    last = await _reply(daemon, conversation_id=cid, text="after", key="after")
    texts = await _texts_through(alice, cid, last.message_id)
    assert texts == ["noted", "the answer", "after"]


async def test_a_refused_reply_acknowledges_nothing(daemon: DaemonProcess, alice: Peer) -> None:
    cid, (q1, q2) = await _asked(daemon, alice, "one", "two")
    acks = {"ack_consumer": "turns", "ack_message_ids": [q1, q2]}

    async def refused_with(second_id: str) -> None:
        await _reply(daemon, conversation_id=cid, text="t", key="refused", ack_consumer="turns",
                     ack_message_ids=[q1, second_id])  # fmt: skip

    # Refused by the proto's rules at the edge.
    with pytest.raises(InvalidArgument) as bad:
        await refused_with("NOT-HEX")
    assert bad.value.field == "ackMessageIds"
    # Refused by the core before the claim (data that is not JSON, over gRPC).
    with pytest.raises(InvalidArgument):
        await _reply(daemon, conversation_id=cid, data_json="{not json", key="refused", **acks)
    # An id never received refuses the whole call: nothing acknowledged, no key claimed.
    with pytest.raises(NotFound) as unknown:
        await refused_with("ab" * 32)
    assert unknown.value.reason == "unknown_message"
    assert await _pending(daemon, "turns", cid) == [q1, q2]
    assert not (await daemon.status()).outbox
    # A key first used for other content is a conflict: nothing acknowledged.
    await _reply(daemon, conversation_id=cid, text="first", key="used-first")
    with pytest.raises(Conflict):
        await _reply(daemon, conversation_id=cid, data_json='{"a": 1}', key="used-first", **acks)
    assert await _pending(daemon, "turns", cid) == [q1, q2]

    # The key refused for an unknown id was never claimed: it sends now, once.
    sent = await _reply(daemon, conversation_id=cid, text="t", key="refused", **acks)
    assert (sent.deduplicated, sent.acknowledged) == (False, 2)
    assert await _pending(daemon, "turns", cid) == []
    texts = await _texts_through(alice, cid, sent.message_id)
    assert texts == ["first", "t"]


async def test_a_reply_waiting_in_the_outbox_still_acknowledges(
    daemon: DaemonProcess, alice: Peer, devnet_node: Devnet
) -> None:
    cid, (q1,) = await _asked(daemon, alice, "are you there?")
    devnet_node.faults.fail_group(bytes.fromhex(cid), 1000)
    waiting = await _reply(
        daemon,
        conversation_id=cid,
        text="yes, eventually",
        key="reply:q1",
        ack_consumer="turns",
        ack_message_ids=[q1],
    )
    # The claim committed: the reply is durably the outbox's to deliver, so the
    # message it answers is acknowledged though the publication failed.
    assert (waiting.published, waiting.acknowledged) == (False, 1)
    assert await _pending(daemon, "turns", cid) == []
    assert [o.key for o in (await daemon.status()).outbox] == ["reply:q1"]
    devnet_node.faults.clear()

    async def delivered() -> bool:
        return not (await daemon.status()).outbox

    await until(delivered)
    last = await _reply(daemon, conversation_id=cid, text="after", key="after-waiting")
    assert await _texts_through(alice, cid, last.message_id) == ["yes, eventually", "after"]


async def test_a_kill9_right_after_the_replys_transaction_keeps_the_reply_and_the_ack(
    home: Path, devnet: str, alice: Peer
) -> None:
    # The failpoint stops the store's thread right after the first group commit of a
    # claim (the Reply's, with its acknowledgement), before the call learns of it.
    marker = home.parent / f"{home.name}.failpoint"
    env = {
        "CONE_FAILPOINT": "group_commit",
        "CONE_FAILPOINT_GROUP": "1",
        "CONE_FAILPOINT_FILE": str(marker),
    }
    async with DaemonProcess(home, devnet, extra_env=env) as daemon:
        cid, (q1, q2) = await _asked(daemon, alice, "first question", "second question")
        acks = {"ack_consumer": "turns", "ack_message_ids": [q1, q2]}
        call = _reply(daemon, conversation_id=cid, text="the one answer", key="reply:q2", **acks)

        task = asyncio.ensure_future(call)
        await daemon.kill9_at_failpoint(marker)
        with pytest.raises(ConeError):
            await task
        await daemon.restart_without_failpoint()
        # Both survived: the messages are not handed out again...
        assert await _pending(daemon, "turns", cid) == []
        assert await _pending(daemon, "other", cid) == [q1, q2]
        # ...and the retried call answers as the first would, sending nothing new.
        again = await _reply(
            daemon, conversation_id=cid, text="regenerated", key="reply:q2", **acks
        )
        assert (again.deduplicated, again.acknowledged) == (True, 2)

        async def settled() -> bool:
            return not (await daemon.status()).outbox

        await until(settled)
        last = await _reply(daemon, conversation_id=cid, text="after", key="after")
        texts = await _texts_through(alice, cid, last.message_id)
        assert texts == ["the one answer", "after"]
