"""When a catch-up period lists again (cone/core/intake/relisting.py): the decision, and the
core's sync acting on it over a real store and the fake engine."""

from __future__ import annotations

import pytest

from cone.core.intake.relisting import EVERY, Relisting
from cone.core.intake.window_turns import ROUNDS
from cone.core.service import Core
from cone.engine.port import SyncSummary
from cone.store import inbox
from support.fake_engine import FakeEngine

QUIET = SyncSummary(eligible=10, synced=0)


def _listed_after(summary: SyncSummary | None = QUIET) -> Relisting:
    r = Relisting()
    r.listed(summary)
    return r


def test_a_quiet_sync_after_a_listing_keeps_it() -> None:
    assert not _listed_after().needed(QUIET)


def test_nothing_listed_yet_lists() -> None:
    assert Relisting().needed(QUIET)


def test_a_sync_that_synced_a_group_lists() -> None:
    assert _listed_after().needed(SyncSummary(eligible=10, synced=1))


def test_a_new_conversation_lists_and_so_does_a_changed_count() -> None:
    assert _listed_after().needed(SyncSummary(eligible=11, synced=0))
    assert _listed_after().needed(SyncSummary(eligible=9, synced=0))


def test_a_missing_summary_lists_now_and_next_period() -> None:
    r = _listed_after()
    assert r.needed(None)
    r.listed(None)  # the listing taken after a sync that reported nothing
    assert r.needed(QUIET)


def test_expired_lists_until_a_listing_is_read() -> None:
    r = _listed_after()
    r.expire()
    assert r.needed(QUIET)
    r.listed(QUIET)
    assert not r.needed(QUIET)


def test_a_kept_listing_serves_at_most_every_periods_in_a_row() -> None:
    assert EVERY == ROUNDS
    r = _listed_after()
    kept = 0
    while not r.needed(QUIET):
        r.kept()
        kept += 1
    assert kept == EVERY - 1  # the EVERY-th period lists
    r.listed(QUIET)
    assert not r.needed(QUIET)


def test_the_count_compares_with_the_sync_before_the_held_listing() -> None:
    r = _listed_after(SyncSummary(eligible=10, synced=3))
    assert not r.needed(QUIET)
    r.kept()
    assert r.needed(SyncSummary(eligible=12, synced=0))


class _Summarizing(FakeEngine):
    """The fake engine, its sync reporting what the test sets (libxmtp's summary)."""

    summary = SyncSummary(eligible=2, synced=0)

    async def sync_all(self) -> SyncSummary:
        await super().sync_all()
        return self.summary


@pytest.fixture
def engine() -> FakeEngine:
    return _Summarizing()


async def test_a_quiet_period_keeps_the_listing_and_reads_the_conversations_published_in(
    core: Core, engine: _Summarizing
) -> None:
    _, alice = engine.peer("alice")
    _, bob = engine.peer("bob")
    sent_in, other = engine.dm(alice), engine.dm(bob)
    await core.intake.sync()  # the start's first sync: lists
    listed = engine.listings
    # A peer's message a send's sync stored, the stream not handing it over, and
    # one in another conversation that nothing announced.
    engine.incoming(sent_in, alice, "pulled in by the send's sync")
    engine.incoming(other, bob, "unannounced")
    core.outbox.on_published(sent_in)  # the outbox's hook after the publication
    _, current = await core.intake.catch_up.sync(keep_listing=True)
    assert not current and engine.listings == listed
    assert await core.store.read(inbox.known_count, sent_in) == 1
    assert await core.store.read(inbox.known_count, other) == 0

    engine.summary = SyncSummary(eligible=2, synced=1)  # the next sync brings news
    _, current = await core.intake.catch_up.sync(keep_listing=True)
    assert current and engine.listings == listed + 1
    assert await core.store.read(inbox.known_count, other) == 1


async def test_the_sync_operation_always_lists(core: Core, engine: _Summarizing) -> None:
    await core.intake.sync()
    listed = engine.listings
    await core.intake.sync()
    assert engine.listings == listed + 1
