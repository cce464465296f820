"""The catch-up lists conversations again only when its sync brought something in, and
a long pass stretches the wait before the next.

A real core in this process over a real engine, store and devnet, catching up every
0.3 s (0.1 s in the test of a long pass). The engine's `sync_all` and `conversations`
are wrapped to note each call in order (instrumentation: the real calls run): a period
is a sync and what follows it up to the next sync (cone/core/intake/relisting.py,
docs/guarantees.md path 2).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.core.intake.followups import PARALLEL
from cone.core.intake.pacing import FLOOR_S, next_wait
from cone.core.intake.relisting import EVERY
from cone.core.service import Core
from cone.devnet import Devnet
from cone.engine import _client
from cone.engine.engine import Engine
from cone.engine.port import SyncSummary
from cone.store import Store, conversations, inbox, reconciled, xmtp_database
from support.daemons import BACKENDS
from support.peers import Peer, plain_group_options
from support.waiting import until

PERIOD_S = 0.3
#: The interval of the test of a long pass's stretched wait.
STRETCH_PERIOD_S = 0.1
KEY = bytes(range(32))


class _Calls:
    """The engine's syncs (with their summaries) and listings, in order."""

    def __init__(self, engine: Engine) -> None:
        self.events: list[SyncSummary | str | None] = []
        self.restarts = 0  # streams reopened (each reads every conversation)
        sync_all, listing = engine.sync_all, engine.conversations

        async def synced() -> SyncSummary | None:
            summary = await sync_all()
            self.events.append(summary)
            return summary

        async def listed(expected: int = 0) -> Any:
            found = await listing(expected)
            self.events.append("listing")
            return found

        engine.sync_all = synced  # type: ignore[method-assign]  # instrumentation
        engine.conversations = listed  # type: ignore[method-assign]  # instrumentation

    def periods(self, since: int = 0) -> list[tuple[SyncSummary | None, int]]:
        """Each complete period since event `since`: its sync's summary and how many
        listings followed before the next sync."""
        out: list[tuple[SyncSummary | None, int]] = []
        for event in self.events[since:]:
            if event == "listing":
                if out:
                    out[-1] = (out[-1][0], out[-1][1] + 1)
            else:
                assert not isinstance(event, str)
                out.append((event, 0))
        return out[:-1]  # the last one may still list


@pytest.fixture
def period_s() -> float:
    """The core's catch-up interval (a test parametrizes it to change it)."""
    return PERIOD_S


@pytest.fixture
async def core(devnet: str, tmp_path: Path, backend: str, period_s: float) -> AsyncIterator[Core]:
    """A core on the backend (V3 unless a test parametrizes it), not started."""
    engine = await Engine.open(
        api_url=devnet,
        gateway_url=devnet if backend == "d14n" else None,
        db_path=str(tmp_path / "xmtp.db3"),
        db_key=os.urandom(32),
        wallet_key=_client.generate_wallet_key(),
        new=True,
        child=xmtp_database,
    )
    store = Store.open(tmp_path / "cone.db", KEY)
    core = Core(store, engine, "local", tmp_path / "xmtp.db3", catchup_interval_s=period_s)
    try:
        yield core
    finally:
        await core.stop()
        store.close()


async def _started(core: Core) -> _Calls:
    assert isinstance(core.engine, Engine)
    calls = _Calls(core.engine)
    restarted = core.intake._on_stream_restart

    def counted() -> None:
        calls.restarts += 1
        restarted()

    core.intake._on_stream_restart = counted  # type: ignore[method-assign]  # instrumentation
    await core.start()
    await core.started()

    async def reconciled() -> bool:
        return not core.intake.reconciling()

    await until(reconciled)
    return calls


async def _periods(calls: _Calls, since: int, n: int) -> list[tuple[SyncSummary | None, int]]:
    """At least `n` complete periods since event `since`."""

    async def done() -> list[tuple[SyncSummary | None, int]] | None:
        periods = calls.periods(since)
        return periods if len(periods) >= n else None

    return await until(done)


async def _first(
    calls: _Calls, since: int, which: Callable[[SyncSummary], bool]
) -> tuple[SyncSummary | None, int]:
    """The first complete period since event `since` whose sync's summary is `which`."""

    async def found() -> tuple[SyncSummary | None, int] | None:
        periods = calls.periods(since)
        return next((p for p in periods if p[0] is not None and which(p[0])), None)

    return await until(found)


def _streams_down(devnet_node: Devnet) -> None:
    """The message and conversation streams end and hang reopening: nothing is
    delivered, and none reopens (which would read every conversation)."""
    devnet_node.faults.set_latency("SubscribeGroupMessages", 3600)
    devnet_node.faults.set_latency("SubscribeWelcomeMessages", 3600)
    devnet_node.faults.drop_streams()


async def _all_down(core: Core) -> bool:
    """The message and conversation streams are down (the consent stream is local)."""
    return not any(
        h.connected for h in core.engine.stream_health() if h.name in ("messages", "conversations")
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_idle_core_keeps_its_listing_and_lists_again_every_few_periods(
    core: Core, alice: Peer
) -> None:
    dm = await alice.client.conversations().find_or_create_dm(
        core.engine.inbox_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
    )
    await alice.send(dm, "hello")
    calls = await _started(core)
    await until(lambda: core.store.read(conversations.get, bytes(dm.id()).hex()))
    since = len(calls.events)
    periods = await _periods(calls, since, 2 * EVERY + 1)
    assert all(s is not None and s.synced == 0 for s, _ in periods)  # nothing arrived
    listings = [n for _, n in periods]
    assert listings.count(0) >= EVERY  # the sync's own listing sufficed
    # ... and never for more than EVERY - 1 periods in a row.
    assert "0" * EVERY not in "".join(str(min(n, 1)) for n in listings)


async def test_the_start_lists_for_its_read_and_its_first_sync_and_the_pass_reuses_it(
    core: Core, alice: Peer
) -> None:
    """A listing of 10,000 conversations is about a second of libxmtp's: the start's
    full reconciliation reads by the first sync's, taken a moment before it."""
    dm = await alice.client.conversations().find_or_create_dm(
        core.engine.inbox_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
    )
    await alice.send(dm, "hello")
    calls = await _started(core)  # the pass is done
    first_sync = next(i for i, e in enumerate(calls.events) if e != "listing")
    assert calls.events[:first_sync] == ["listing"]  # the start's read
    assert calls.events[first_sync + 1] == "listing"  # the first sync's
    # Next comes the first catch-up period's sync: the pass listed nothing of its own.
    assert len(calls.events) == first_sync + 2 or calls.events[first_sync + 2] != "listing"
    assert await core.store.read(reconciled.marks)  # ... and it did read by it


async def test_a_message_while_the_streams_are_down_is_taken_by_the_period_that_synced_it(
    core: Core, alice: Peer, devnet_node: Devnet
) -> None:
    dm = await alice.client.conversations().find_or_create_dm(
        core.engine.inbox_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
    )
    await alice.send(dm, "first")
    calls = await _started(core)
    cid = bytes(dm.id()).hex()
    await until(lambda: core.store.read(conversations.get, cid))
    await _periods(calls, len(calls.events), 2)  # quiet periods: the listing is kept
    _streams_down(devnet_node)
    await until(lambda: _all_down(core))
    since, restarts = len(calls.events), calls.restarts
    sent = bytes(await alice.send(dm, "while down")).hex()

    async def taken() -> bool:
        return bool(await core.store.read(inbox.known_ids, [sent]))

    await until(taken)
    assert calls.restarts == restarts  # no stream reopened: no full read took it
    # The period whose sync synced the DM listed again (and read it).
    news = await _first(calls, since, lambda s: s.synced > 0)
    assert news[1] >= 1


async def test_a_conversation_made_while_the_streams_are_down_is_recorded(
    core: Core, alice: Peer, devnet_node: Devnet
) -> None:
    calls = await _started(core)
    (before, _), *_ = await _periods(calls, len(calls.events), 2)
    assert before is not None
    _streams_down(devnet_node)
    await until(lambda: _all_down(core))
    since, restarts = len(calls.events), calls.restarts
    group = await alice.client.conversations().create_group(
        [core.engine.inbox_id], plain_group_options()
    )
    cid = bytes(group.id()).hex()
    await until(lambda: core.store.read(conversations.get, cid))
    assert calls.restarts == restarts
    grew = await _first(calls, since, lambda s: s.eligible > before.eligible)
    assert grew[1] >= 1  # one more conversation: listed again


# A shorter interval: a long pass's wait is capped at 8 intervals, which this test
# waits out between its passes (0.8 s each, not 2.4 s).
@pytest.mark.parametrize("period_s", [STRETCH_PERIOD_S])
async def test_a_long_catch_up_pass_stretches_the_wait_before_the_next(
    core: Core, caplog: pytest.LogCaptureFixture, period_s: float
) -> None:
    """The pacing (cone/core/intake/pacing.py) with the bad timing forced: each sync is held
    1 s longer than it takes, so every pass is long; the log says so once."""
    caplog.set_level(logging.INFO, logger="cone.core.service")
    await _started(core)
    synced = core.engine.sync_all
    passes: list[tuple[float, float]] = []  # each sync's start and end

    async def slow() -> SyncSummary | None:
        start = time.monotonic()
        await asyncio.sleep(FLOOR_S)  # the input: every sync this much longer
        try:
            return await synced()
        finally:
            passes.append((start, time.monotonic()))

    core.engine.sync_all = slow  # type: ignore[method-assign]  # instrumentation
    since = len(caplog.records)  # (a loaded machine may have stretched a wait already)

    async def three() -> bool:
        return len(passes) >= 3

    await until(three)
    for (start, end), (after, _) in itertools.pairwise(passes[:3]):
        # The wait began when the pass ended, after its sync: at least the stretched
        # wait for a sync this long (the cap, 8 intervals, at this test's interval).
        assert after - end >= next_wait(period_s, end - start) - 0.01
        assert next_wait(period_s, end - start) > period_s
    # Said once while the passes stay long (every one of them is).
    said = [r.getMessage() for r in caplog.records[since:] if "catching up" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("a catch-up took "), said

    core.engine.sync_all = synced  # type: ignore[method-assign]  # short passes again
    restored = len(caplog.records)

    async def short_again() -> bool:
        return any("short again" in r.getMessage() for r in caplog.records[restored:])

    await until(short_again)


async def test_a_period_due_while_the_follow_ups_are_behind_waits_one_interval_more(
    core: Core, alice: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    """The bad timing forced: the follow-up syncs of more new conversations than they
    take at once are held, so the burst never ends. Periods still come, each one
    interval later than it fell due (cone/core/intake/catch_up.py: libxmtp's sync of every
    conversation held its streams back during a burst into a big store)."""
    caplog.set_level(logging.DEBUG, logger="cone.core.service")
    await _started(core)
    release = asyncio.Event()
    follow_up, synced = core.engine.sync_conversation, core.engine.sync_all
    starts: list[float] = []  # each sync's start

    async def held(conversation_id: str) -> None:
        await release.wait()
        await follow_up(conversation_id)

    async def noted() -> SyncSummary | None:
        starts.append(time.monotonic())
        return await synced()

    core.engine.sync_conversation = held  # type: ignore[method-assign]  # instrumentation
    core.engine.sync_all = noted  # type: ignore[method-assign]  # instrumentation
    for _ in range(PARALLEL + 1):  # one more than the follow-ups sync at once
        group = await alice.client.conversations().create_group(
            [core.engine.inbox_id], plain_group_options()
        )
        cid = bytes(group.id()).hex()
        await until(functools.partial(core.store.read, conversations.get, cid))
    since, logged = len(starts), len(caplog.records)

    async def three() -> bool:
        return len(starts) >= since + 3

    await until(three)
    release.set()
    for before, after in itertools.pairwise(starts[since : since + 3]):
        assert after - before >= 2 * PERIOD_S - 0.01  # the interval, then one more
    waited = [r for r in caplog.records[logged:] if "follow-up syncs" in r.getMessage()]
    assert len(waited) >= 2
