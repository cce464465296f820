"""What a sync reads: only conversations whose newest listed message changed since
cone last read them; one listing shared by a catch-up period's readers; the full
reconciliation reads a conversation whose pass failed again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cone.core import ingest
from cone.core.service import Core
from cone.engine.port import RawMessage
from cone.errors import Unavailable
from cone.store import inbox
from support.fake_engine import FakeEngine


async def test_a_sync_reads_only_the_conversations_whose_newest_message_changed(
    core: Core, engine: FakeEngine
) -> None:
    _, alice = engine.peer("alice")
    _, bob = engine.peer("bob")
    quiet, busy = engine.dm(alice), engine.dm(bob)
    engine.incoming(quiet, alice, "one")
    engine.incoming(busy, bob, "two")
    await core.ingestor.ingest_all()
    assert core.ingestor.last_read == (2, 2)

    engine.incoming(busy, bob, "three")
    await core.ingestor.ingest_all(changed_only=True)
    assert core.ingestor.last_read == (1, 2)
    assert await core.store.read(inbox.known_count, busy) == 2

    await core.ingestor.ingest_all(changed_only=True)
    assert core.ingestor.last_read == (0, 2)


async def test_a_new_conversation_is_read_by_the_next_sync(core: Core, engine: FakeEngine) -> None:
    _, alice = engine.peer("alice")
    await core.ingestor.ingest_all()
    cid = engine.dm(alice)
    engine.incoming(cid, alice, "hello")
    await core.ingestor.ingest_all(changed_only=True)
    assert core.ingestor.last_read == (1, 1)
    assert await core.store.read(inbox.known_count, cid) == 1


async def test_the_window_check_and_the_settings_refresh_share_a_period_s_listing(
    core: Core, engine: FakeEngine
) -> None:
    _, alice = engine.peer("alice")
    engine.dm(alice)
    await core.sync()  # lists once (its read), as each catch-up period does
    listed = engine.listings
    await core.retention.refresh_quietly(await core._conversation_ids())
    assert engine.listings == listed


async def test_the_full_reconciliation_reads_a_failed_conversation_again(
    core: Core, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "RECONCILE_AGAIN_S", (0.0, 0.0))
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
    await core.ingestor.reconcile_all()
    assert reads[flaky] == 3
    assert await core.store.read(inbox.known_count, flaky) == 1
    assert await core.store.read(inbox.known_count, steady) == 1


async def test_a_conversation_that_keeps_failing_is_left_to_the_next_start(
    core: Core, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "RECONCILE_AGAIN_S", (0.0,))
    _, alice = engine.peer("alice")
    broken = engine.dm(alice)
    engine.incoming(broken, alice, "one")
    tries = 0

    async def always(cid: str, after: int) -> AsyncIterator[list[RawMessage]]:
        nonlocal tries
        tries += 1
        raise Unavailable("reading messages failed: no answer within 30 s")
        yield []  # an async generator, as the engine's

    monkeypatch.setattr(engine, "message_pages", always)
    await core.ingestor.reconcile_all()
    assert tries == 2
    assert await core.store.read(inbox.known_count, broken) == 0
