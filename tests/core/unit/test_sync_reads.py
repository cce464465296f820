"""What a sync reads: only conversations whose newest listed message changed since
cone last read them; libxmtp's listing one at a time, shared by the callers that
waited for it, and none for the settings refresh; the full reconciliation reads a
conversation whose pass failed again."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator

import pytest

from cone.core.intake import reconciliation
from cone.core.intake.committing import READ_MARGIN_NS
from cone.core.service import Core
from cone.engine.port import ListedConversation, RawMessage
from cone.errors import Unavailable
from cone.store import inbox, reconciled
from support.fake_engine import FakeEngine


async def test_a_sync_reads_only_the_conversations_whose_newest_message_changed(
    core: Core, engine: FakeEngine
) -> None:
    _, alice = engine.peer("alice")
    _, bob = engine.peer("bob")
    quiet, busy = engine.dm(alice), engine.dm(bob)
    engine.incoming(quiet, alice, "one")
    engine.incoming(busy, bob, "two")
    await core.intake.ingestor.ingest_all()
    assert core.intake.ingestor.last_read == (2, 2)

    engine.incoming(busy, bob, "three")
    await core.intake.ingestor.ingest_all(changed_only=True)
    assert core.intake.ingestor.last_read == (1, 2)
    assert await core.store.read(inbox.known_count, busy) == 2

    await core.intake.ingestor.ingest_all(changed_only=True)
    assert core.intake.ingestor.last_read == (0, 2)


async def test_a_new_conversation_is_read_by_the_next_sync(core: Core, engine: FakeEngine) -> None:
    _, alice = engine.peer("alice")
    await core.intake.ingestor.ingest_all()
    cid = engine.dm(alice)
    engine.incoming(cid, alice, "hello")
    await core.intake.ingestor.ingest_all(changed_only=True)
    assert core.intake.ingestor.last_read == (1, 1)
    assert await core.store.read(inbox.known_count, cid) == 1


async def test_the_settings_refresh_reads_cone_s_conversations_without_a_listing(
    core: Core, engine: FakeEngine
) -> None:
    _, alice = engine.peer("alice")
    cid = engine.dm(alice)
    engine.incoming(cid, alice, "hello")
    await core.intake.sync()  # lists once (its read), as each catch-up period does
    listed = engine.listings
    # Its own period drifts from the catch-up's: long after the sync's listing, it
    # still lists nothing (a libxmtp listing reads every stored message).
    core.intake.catch_up._listing = None
    assert await core._conversation_ids() == [cid]
    assert engine.listings == listed


class _GatedListing:
    """The engine's listing held open until released; counts how many run at once."""

    def __init__(self, engine: FakeEngine) -> None:
        self._list = engine.conversations
        self.release = asyncio.Event()
        self.running = self.most = self.calls = 0

    async def __call__(self, expected: int = 0) -> list[ListedConversation]:
        self.calls += 1
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.release.wait()
            return await self._list(expected)
        finally:
            self.running -= 1


async def _settle() -> None:
    """Let every ready task run to where it waits (no time passes: the loop's turns)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_listings_run_one_at_a_time_and_a_waiting_caller_shares_the_next(
    core: Core, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, alice = engine.peer("alice")
    engine.dm(alice)
    gated = _GatedListing(engine)
    monkeypatch.setattr(engine, "conversations", gated)
    # The catch-up's sync, ingest after a stream restart and the full pass, at once.
    first = asyncio.create_task(core.intake.catch_up.list())
    await _settle()
    assert gated.running == 1
    others = [
        asyncio.create_task(core.intake.ingestor.ingest_all()),
        asyncio.create_task(core.intake.ingestor.reconciler.reconcile_all()),
        asyncio.create_task(core.intake.catch_up.list()),
    ]
    await _settle()  # each has asked for its listing by now
    assert gated.most == 1
    gated.release.set()
    await asyncio.gather(first, *others)
    # Each caller after the first asked while it ran: one fresh listing serves them all.
    assert gated.most == 1
    assert gated.calls == 2


@pytest.mark.parametrize("held", [reconciliation.KNOWN_HELD, 3], ids=["read_ahead", "looked_up"])
async def test_the_full_reconciliation_heals_exactly_what_ingest_missed(
    core: Core, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch, held: int
) -> None:
    """Whether it reads a conversation's known ids ahead, or (more of them than
    `KNOWN_HELD`) looks up each page's: each message compared once, only the one
    ingest missed healed, an own message (skipped, not delivered) known all the same."""
    monkeypatch.setattr(reconciliation, "KNOWN_HELD", held)
    _, alice = engine.peer("alice")
    _, bob = engine.peer("bob")
    cid, other = engine.dm(alice), engine.dm(bob)
    for i in range(4):
        engine.incoming(cid, alice, f"read {i}")
    engine.incoming(cid, engine.inbox_id, "own")
    engine.incoming(other, bob, "elsewhere")
    await core.intake.ingestor.ingest_all()
    # Stored by libxmtp long before cone's last read, and never taken by ingest.
    missed = engine.incoming(cid, alice, "missed")
    engine.held[cid].messages[-1] = dataclasses.replace(missed, inserted_at_ns=1)

    assert await core.intake.ingestor.reconciler.reconcile_all() == 1
    assert await core.store.read(inbox.known_count, cid) == 6
    assert await core.store.read(inbox.known_ids, [missed.id]) == {missed.id}
    assert await core.intake.ingestor.reconciler.reconcile_all() == 0


async def test_a_group_update_has_its_setting_read_when_taken_in_not_when_read_again(
    core: Core, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group update may change the disappearing setting: taking one in reads the
    conversation's setting. The start's full reconciliation reads the messages again
    (every one the first time); one it had read before reads no setting (the periodic
    refresh is the net)."""
    _, alice = engine.peer("alice")
    cid = engine.dm(alice)
    engine.incoming(cid, alice, "hello")
    engine.group_update(cid, alice)
    asked: list[list[str]] = []

    async def disappearing(conversation_ids: list[str]) -> dict[str, tuple[int, int]]:
        asked.append(list(conversation_ids))
        return {}

    monkeypatch.setattr(engine.groups, "disappearing", disappearing)
    await core.intake.ingestor.ingest_all()
    assert asked == [[cid]]
    await core.intake.ingestor.reconciler.reconcile_all()
    assert asked == [[cid]]
    engine.group_update(cid, alice)  # one ingest missed: the pass takes it
    await core.intake.ingestor.reconciler.reconcile_all()
    assert asked == [[cid], [cid]]


async def test_the_full_reconciliation_reads_a_failed_conversation_again(
    core: Core, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconciliation, "RECONCILE_AGAIN_S", (0.0, 0.0))
    _, alice = engine.peer("alice")
    _, bob = engine.peer("bob")
    flaky, steady = engine.dm(alice), engine.dm(bob)
    engine.incoming(flaky, alice, "one")
    engine.incoming(steady, bob, "two")
    # Held in libxmtp's database, not read by ingest yet: the pass takes them in.
    reads = {flaky: 0}
    pages = engine.message_pages

    async def overrun_twice(cid: str, after: int) -> AsyncIterator[list[RawMessage]]:
        if cid in reads:
            reads[cid] += 1
            if reads[cid] <= 2:
                raise Unavailable("reading messages failed: no answer within 30 s")
        async for page in pages(cid, after):
            yield page

    monkeypatch.setattr(engine, "message_pages", overrun_twice)
    await core.intake.ingestor.reconciler.reconcile_all()
    assert reads[flaky] == 3
    assert await core.store.read(inbox.known_count, flaky) == 1
    assert await core.store.read(inbox.known_count, steady) == 1


async def test_a_conversation_that_keeps_failing_is_left_to_the_next_start(
    core: Core, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """...and keeps no mark: the next start's pass reads it whole, while a conversation
    whose pass succeeded is read from its mark (cone/store/reconciled.py)."""
    monkeypatch.setattr(reconciliation, "RECONCILE_AGAIN_S", (0.0,))
    _, alice = engine.peer("alice")
    _, bob = engine.peer("bob")
    broken, steady = engine.dm(alice), engine.dm(bob)
    engine.incoming(broken, alice, "one")
    engine.incoming(steady, bob, "two")
    tries = 0
    pages = engine.message_pages
    read_from: dict[str, int] = {}
    failing_now = True

    async def failing(cid: str, after: int) -> AsyncIterator[list[RawMessage]]:
        nonlocal tries
        read_from[cid] = after
        if cid == broken and failing_now:
            tries += 1
            raise Unavailable("reading messages failed: no answer within 30 s")
        async for page in pages(cid, after):
            yield page

    monkeypatch.setattr(engine, "message_pages", failing)
    began = time.time_ns()
    await core.intake.ingestor.reconciler.reconcile_all()
    assert tries == 2
    assert await core.store.read(inbox.known_count, broken) == 0
    marks = await core.store.read(reconciled.marks)
    assert list(marks) == [steady]
    assert began - READ_MARGIN_NS <= marks[steady].through_ns <= time.time_ns() - READ_MARGIN_NS
    assert began <= marks[steady].whole_ns == marks[steady].through_ns + READ_MARGIN_NS

    failing_now = False
    await core.intake.ingestor.reconciler.reconcile_all()
    assert read_from == {broken: 0, steady: marks[steady].through_ns}
