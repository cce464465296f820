"""A start reads only what libxmtp stored since: a conversation whose newest insert
stamp is at or below the point a read would start from (its read point for the
start's read, its mark for the full reconciliation) is not read, and that point
moves to when the stamps were read, as a read that found nothing would move it.
Without the stamps (their read failed) every conversation is read as before."""

from __future__ import annotations

import dataclasses
import time

from cone.core.intake.committing import READ_MARGIN_NS
from cone.core.service import Core
from cone.store import conversations, inbox, reconciled
from support.fake_engine import FakeEngine

HOUR_NS = 3600 * 10**9


def _stored_long_ago(engine: FakeEngine) -> None:
    """Move every stamp an hour back: below any point a read or a pass keeps from now."""
    for held in engine.held.values():
        held.messages = [
            dataclasses.replace(m, inserted_at_ns=m.inserted_at_ns - HOUR_NS) for m in held.messages
        ]


async def _two_read(core: Core, engine: FakeEngine) -> tuple[str, str, str, str]:
    """Two DMs libxmtp stored a message in an hour ago, read by cone; their ids and
    peers' inboxes (quiet first)."""
    _, alice = engine.peer("alice")
    _, bob = engine.peer("bob")
    quiet, busy = engine.dm(alice), engine.dm(bob)
    engine.incoming(quiet, alice, "one")
    engine.incoming(busy, bob, "two")
    _stored_long_ago(engine)
    await core.intake.ingestor.ingest_all()
    engine.reads.clear()
    return quiet, busy, alice, bob


async def test_the_start_s_read_reads_only_conversations_with_something_stored_since(
    core: Core, engine: FakeEngine
) -> None:
    quiet, busy, _, bob = await _two_read(core, engine)
    engine.incoming(busy, bob, "three")
    newest = await engine.newest_stamps()
    assert newest is not None

    assert await core.intake.ingestor.ingest_all(newest=newest) == 1
    assert engine.reads == [busy]
    assert core.intake.ingestor.last_read == (1, 2)
    assert await core.store.read(inbox.known_count, busy) == 2
    points = await core.store.read(conversations.ingested_points)
    assert points[quiet] == newest.taken_ns - READ_MARGIN_NS


async def test_a_conversation_cone_does_not_record_yet_is_read_whatever_its_stamps(
    core: Core, engine: FakeEngine
) -> None:
    """A conversation libxmtp synced with its history (stamped long ago) and cone has
    no record of yet: no read point to compare with, so it is read and recorded."""
    await _two_read(core, engine)
    _, carol = engine.peer("carol")
    new = engine.dm(carol)
    engine.incoming(new, carol, "history")
    _stored_long_ago(engine)

    assert await core.intake.ingestor.ingest_all(newest=await engine.newest_stamps()) == 1
    assert engine.reads == [new]
    assert await core.store.read(conversations.get, new) is not None


async def test_without_stamps_the_start_s_read_reads_every_conversation(
    core: Core, engine: FakeEngine
) -> None:
    await _two_read(core, engine)
    engine.stamps_readable = False
    assert await core.intake.ingestor.ingest_all(newest=await engine.newest_stamps()) == 0
    assert core.intake.ingestor.last_read == (2, 2)
    assert len(engine.reads) == 2


async def test_the_pass_skips_a_conversation_stored_nothing_in_since_its_mark(
    core: Core, engine: FakeEngine
) -> None:
    quiet, busy, _, bob = await _two_read(core, engine)
    await core.intake.ingestor.reconciler.reconcile_all()  # no marks: both read whole
    assert sorted(engine.reads) == sorted([quiet, busy])
    first = await core.store.read(reconciled.marks)
    engine.reads.clear()
    engine.incoming(busy, bob, "three")  # stamped now: above the mark

    began = time.time_ns()
    await core.intake.ingestor.reconciler.reconcile_all()
    assert engine.reads == [busy]
    assert engine.stamp_reads == 1
    marks = await core.store.read(reconciled.marks)
    # The quiet one's mark moves to the stamps' read; its last whole read stays.
    assert began - READ_MARGIN_NS <= marks[quiet].through_ns <= time.time_ns() - READ_MARGIN_NS
    assert marks[quiet].whole_ns == first[quiet].whole_ns
    assert marks[busy].whole_ns == first[busy].whole_ns
    assert marks[busy].through_ns > first[busy].through_ns
    assert await core.store.read(inbox.known_count, busy) == 2


async def test_a_gap_in_a_skipped_conversation_waits_for_its_whole_read(
    core: Core, engine: FakeEngine
) -> None:
    """A message stamped below the mark that cone never read is no more the skipped
    pass's than it was the pass read from the mark's: the catch-up's count check, or
    the next whole read, finds it. Stamps only say whether a read would find anything."""
    quiet, _, alice, _ = await _two_read(core, engine)
    await core.intake.ingestor.reconciler.reconcile_all()
    missed = engine.incoming(quiet, alice, "missed")
    engine.held[quiet].messages[-1] = dataclasses.replace(missed, inserted_at_ns=1)
    engine.reads.clear()

    assert await core.intake.ingestor.reconciler.reconcile_all() == 0
    assert engine.reads == []
    await core.store.write(lambda conn: conn.execute("DELETE FROM reconciled"))
    assert await core.intake.ingestor.reconciler.reconcile_all() == 1  # whole: healed


async def test_without_stamps_the_pass_reads_each_conversation_from_its_mark(
    core: Core, engine: FakeEngine
) -> None:
    await _two_read(core, engine)
    await core.intake.ingestor.reconciler.reconcile_all()
    engine.reads.clear()
    engine.stamps_readable = False
    await core.intake.ingestor.reconciler.reconcile_all()
    assert len(engine.reads) == 2


async def test_a_first_pass_reads_no_stamps(core: Core, engine: FakeEngine) -> None:
    """Every conversation is read whole the first time: the stamps would skip none."""
    await _two_read(core, engine)
    await core.intake.ingestor.reconciler.reconcile_all()
    assert engine.stamp_reads == 0
