"""What a sync reads: only conversations whose newest listed message changed since
cone last read them; one listing shared by a catch-up period's readers."""

from __future__ import annotations

from cone.core.service import Core
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
