"""The outbox's states: claimed → prepared → published, retry, failure, key conflict,
and recovery by key after a crash between prepare and its record."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest

from cone.core.content import Outgoing
from cone.core.network import NetworkWatch
from cone.core.outbox import Outbox, SendResult
from cone.core.ratelimit import WriteBudget
from cone.engine.port import NodeAnswer, NodeView
from cone.errors import IDENTITY_UNKNOWN, V3_CUTOVER, Conflict, FailedPrecondition, Unavailable
from cone.store import Consent, Kind, Store, conversations, inbox, outbox
from cone.store.outbox import OutboxRecord
from support.fake_engine import Crash, FakeEngine
from support.waiting import until

HI = Outgoing(text="hi")


@pytest.fixture
async def cid(store: Store, engine: FakeEngine) -> str:
    """An accepted DM, held by libxmtp and recorded by cone."""
    _, peer = engine.peer("peer")
    cid = engine.dm(peer)
    await store.write(conversations.ensure, cid, Kind.DM, peer, Consent.ACCEPTED, 1)
    return cid


async def _send(box: Outbox, cid: str, key: str = "k", message: Outgoing = HI) -> SendResult:
    async def unknown(conversation_id: str) -> None:
        raise AssertionError("the conversation is recorded")

    return await box.send(
        key=key,
        destination=cid,
        conversation_id=cid,
        require_accepted=True,
        record_unknown=unknown,
        message=message,
        reply_to=None,
    )


async def _record(store: Store, key: str = "k") -> OutboxRecord:
    rec = await store.read(outbox.get, key)
    assert rec is not None
    return rec


async def test_a_new_key_is_prepared_published_and_settled(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    sent = await _send(Outbox(store, engine), cid)

    assert sent.published and not sent.deduplicated
    assert engine.prepared == engine.published == [sent.message_id]
    rec = await _record(store)
    assert (rec.state, rec.message_id, rec.attempts, rec.last_error) == (
        "settled",
        sent.message_id,
        1,
        None,
    )


async def test_the_same_key_again_returns_the_first_message_without_sending(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    box = Outbox(store, engine)
    first = await _send(box, cid)

    again = await _send(box, cid)

    assert again == SendResult(first.message_id, cid, deduplicated=True, published=True)
    assert engine.prepared == [first.message_id]


async def test_a_key_reused_for_other_content_or_another_conversation_conflicts(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    box = Outbox(store, engine)
    await _send(box, cid)
    _, other_peer = engine.peer("other")
    other = engine.dm(other_peer)
    await store.write(conversations.ensure, other, Kind.DM, other_peer, Consent.ACCEPTED, 1)

    with pytest.raises(Conflict) as kind:
        await _send(box, cid, message=Outgoing(data_json="{}"))
    with pytest.raises(Conflict) as conversation:
        await _send(box, other)

    assert kind.value.reason == conversation.value.reason == "key_conflict"
    assert len(engine.prepared) == 1


async def test_a_failed_publication_keeps_the_prepared_message_and_retries_it(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    box = Outbox(store, engine)
    engine.fail_publish.append(Unavailable("publishing a message failed: the node is down"))

    waiting = await _send(box, cid)

    assert not waiting.published and waiting.retry_after_ms is not None
    rec = await _record(store)
    assert (rec.state, rec.message_id, rec.attempts) == ("failing", waiting.message_id, 1)
    assert rec.last_error == "publishing a message failed: the node is down"

    box.start()
    try:
        box.retry_now()
        settled = await until(_settled(store), timeout=5)
    finally:
        await box.stop()

    assert settled.message_id == waiting.message_id
    assert engine.prepared == engine.published == [waiting.message_id]


def _settled(store: Store) -> Callable[[], Awaitable[OutboxRecord | None]]:
    """A probe for `until`: the key's record once it is settled."""

    async def probe() -> OutboxRecord | None:
        rec = await store.read(outbox.get, "k")
        return rec if rec is not None and rec.state == "settled" else None

    return probe


async def test_a_failed_prepare_is_recorded_and_the_caller_told(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    engine.fail_prepare.append(Unavailable("preparing a message failed: disk busy"))

    with pytest.raises(Unavailable):
        await _send(Outbox(store, engine), cid)

    rec = await _record(store)
    assert (rec.state, rec.message_id, rec.attempts) == ("failing", None, 1)
    assert engine.prepared == []


async def test_a_v3_cutover_fails_the_send_and_keeps_its_payload_for_later(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    engine.fail_publish.append(FailedPrecondition("refused", reason=V3_CUTOVER))

    with pytest.raises(FailedPrecondition):
        await _send(Outbox(store, engine), cid)

    rec = await _record(store)
    assert rec.state == "failing" and rec.message_id == engine.prepared[0]
    assert rec.next_attempt_ns is not None and rec.next_attempt_ns > rec.created_ns + 250 * 10**9


async def test_after_a_crash_between_prepare_and_publish_the_key_finds_its_message(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    engine.crash_after_prepare = True
    with pytest.raises(Crash):
        await _send(Outbox(store, engine), cid)
    rec = await _record(store)
    assert (rec.state, rec.message_id) == ("pending", None)  # the prepared id was never written
    [prepared] = engine.prepared

    # A new process: the same key is sent again.
    sent = await _send(Outbox(store, engine), cid)

    assert sent.message_id == prepared and sent.published and sent.deduplicated
    assert engine.prepared == engine.published == [prepared]
    assert (await _record(store)).state == "settled"


async def test_a_sent_message_is_known_to_ingest_and_its_publication_is_told(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    box = Outbox(store, engine)
    told: list[str] = []
    box.on_published = told.append
    sent = await _send(box, cid)

    # Ingest reading the message back from libxmtp finds it accounted for (no write).
    assert await store.read(inbox.known_ids, [sent.message_id]) == {sent.message_id}
    assert await store.read(inbox.known_count, cid) == 1
    # The stream's echo never reaches the core: retention hears of the send here.
    assert told == [cid]


async def test_a_publication_in_flight_is_abandoned_once_the_node_forgets_the_identity(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    network = NetworkWatch(None)
    box = Outbox(store, engine, network)
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hangs(conversation_id: str, message_id: str, seen: object = None) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # libxmtp's publication to a node that forgot
        finally:
            cancelled.set()

    engine.publish = hangs  # type: ignore[method-assign]  # this test's publication
    sending = asyncio.create_task(_send(box, cid))
    await asyncio.wait_for(started.wait(), 5)
    network._record(NodeAnswer(NodeView.IDENTITY_UNKNOWN, "it holds no identity updates"))

    with pytest.raises(FailedPrecondition) as refused:
        await asyncio.wait_for(sending, 5)
    assert refused.value.reason == IDENTITY_UNKNOWN
    assert cancelled.is_set()
    rec = await _record(store)
    assert (rec.state, rec.message_id) == ("failing", engine.prepared[0])
    assert rec.last_reason == IDENTITY_UNKNOWN
    # A caller cancelled while publishing is cancelled, not told the node forgot.
    network._record(NodeAnswer(NodeView.KNOWS_IDENTITY, "it knows this identity"))
    started.clear()
    cancelled.clear()
    other = asyncio.create_task(_send(box, cid, key="k2"))
    await asyncio.wait_for(started.wait(), 5)
    other.cancel()
    with pytest.raises(asyncio.CancelledError):
        await other
    assert cancelled.is_set()


def _hold_store(store: Store) -> threading.Event:
    """Keep the store's one thread busy until the returned event is set."""
    release = threading.Event()
    store._pool.submit(release.wait, 30)
    return release


async def test_a_new_key_is_prepared_only_once_its_claim_is_committed(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    release = _hold_store(store)
    sending = asyncio.create_task(_send(Outbox(store, engine), cid))
    await until(lambda: _is(_awaits("write_grouped")), timeout=5)  # the claim is queued
    # The claim is not committed, so nothing may be prepared (libxmtp would publish a
    # prepared message whose key a crash lost, and a retried key would publish again).
    assert engine.prepared == [] and not sending.done()
    release.set()
    sent = await asyncio.wait_for(sending, 5)
    assert engine.prepared == engine.published == [sent.message_id]
    assert (await _record(store)).state == "settled"


async def test_a_key_seen_before_takes_no_slot_of_the_write_budget(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    box = Outbox(store, engine)
    box._budget = WriteBudget(limit=2)
    first = await _send(box, cid, key="k")
    for _ in range(3):
        assert (await _send(box, cid, key="k")).deduplicated
    # The second slot is still free: a repeated key publishes nothing.
    second = await _send(box, cid, key="k2")
    assert second.published and engine.published == [first.message_id, second.message_id]


async def _is(condition: bool) -> bool:
    return condition


def _awaits(name: str) -> bool:
    """Whether a task of this loop is suspended inside the coroutine function `name`."""
    for task in asyncio.all_tasks():
        awaited: object = task.get_coro()
        while awaited is not None:
            code = getattr(awaited, "cr_code", None)
            if code is not None and code.co_name == name:
                return True
            awaited = getattr(awaited, "cr_await", None)
    return False


async def test_a_conversations_next_send_is_prepared_while_the_one_before_is_published(
    store: Store, engine: FakeEngine, cid: str
) -> None:
    box = Outbox(store, engine)
    gate = asyncio.Event()
    publish = engine.publish

    async def slow(conversation_id: str, message_id: str, seen: Callable[[], None]) -> None:
        await gate.wait()  # the node does not have the message yet
        await publish(conversation_id, message_id, seen)

    engine.publish = slow  # type: ignore[method-assign]  # this test's publication
    first = asyncio.create_task(_send(box, cid, key="k1"))
    await until(lambda: _is(len(engine.prepared) == 1), timeout=5)
    second = asyncio.create_task(_send(box, cid, key="k2"))
    # Queued behind the first in libxmtp (one publication may carry both), in order;
    # neither is answered before the node has it.
    await until(lambda: _is(len(engine.prepared) == 2), timeout=5)
    assert not first.done() and not second.done() and engine.published == []
    gate.set()
    sent = await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert [s.message_id for s in sent] == engine.prepared == engine.published
    assert [(await _record(store, k)).state for k in ("k1", "k2")] == ["settled"] * 2
