"""Group commit (cone/store/_group.py) on real SQLCipher: writes queued while the store's
thread is busy share one commit, each caller gets its own outcome, and a write nobody
waits for rides along. The store's thread is held busy by a read that waits on an
event, so the grouping is forced, not left to timing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cone.errors import Conflict
from cone.store import Connection, Consent, Kind, Store, _group, conversations, meta
from cone.store import outbox as outbox_store

KEY = bytes(range(32))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = Store.open(tmp_path / "cone.db", KEY)
    await s.write(conversations.ensure, "c1", Kind.DM, "peer", Consent.ACCEPTED, 1)
    yield s
    s.close()


async def _held(store: Store) -> tuple[threading.Event, asyncio.Future[None]]:
    """Occupy the store's thread until the returned event is set."""
    release = threading.Event()
    started = threading.Event()

    def hold(conn: Connection) -> None:
        started.set()
        release.wait(30)

    busy = asyncio.ensure_future(store.read(hold))
    await asyncio.to_thread(started.wait, 30)
    return release, busy


def _put(conn: Connection, key: str, value: bytes) -> str:
    meta.put(conn, key, value)
    return key


def _refuse(conn: Connection, key: str) -> str:
    meta.put(conn, key, b"never")
    raise Conflict("refused on purpose", reason="test")


async def test_writes_queued_while_the_store_is_busy_share_one_commit(store: Store) -> None:
    release, busy = await _held(store)
    groups, grouped = store.group.groups, store.group.grouped
    writes = [asyncio.ensure_future(store.write_grouped(_put, f"k{i}", b"v")) for i in range(6)]
    await asyncio.sleep(0)  # every write is queued behind the held thread
    release.set()
    await busy

    assert await asyncio.gather(*writes) == [f"k{i}" for i in range(6)]
    assert (store.group.groups - groups, store.group.grouped - grouped) == (1, 6)
    for i in range(6):
        assert await store.read(meta.get, f"k{i}") == b"v"


async def test_one_refused_write_fails_alone_and_the_rest_of_its_group_commits(
    store: Store,
) -> None:
    release, busy = await _held(store)
    groups = store.group.groups
    before = asyncio.ensure_future(store.write_grouped(_put, "before", b"1"))
    refused = asyncio.ensure_future(store.write_grouped(_refuse, "refused"))
    after = asyncio.ensure_future(store.write_grouped(_put, "after", b"2"))
    await asyncio.sleep(0)
    release.set()
    await busy

    assert await before == "before" and await after == "after"
    with pytest.raises(Conflict):
        await refused
    assert store.group.groups - groups == 1
    assert await store.read(meta.get, "refused") is None  # its savepoint was rolled back
    assert await store.read(meta.get, "before") == b"1"
    assert await store.read(meta.get, "after") == b"2"


async def test_claims_of_one_key_in_one_group_make_one_record(store: Store) -> None:
    release, busy = await _held(store)

    def claim(key: str, payload: bytes) -> asyncio.Future[tuple[outbox_store.OutboxRecord, bool]]:
        return asyncio.ensure_future(
            store.write_grouped(
                outbox_store.claim,
                key=key,
                conversation_id="c1",
                destination="c1",
                content_type="xmtp.org/text:1.0",
                payload=payload,
                now_ns=1,
                require_accepted=True,
            )
        )

    first, second = claim("k", b"first"), claim("k", b"second")
    await asyncio.sleep(0)
    release.set()
    await busy

    (rec1, created1, _), (rec2, created2, _) = await first, await second
    assert (created1, created2) == (True, False)
    assert rec1.payload == rec2.payload == b"first"


async def test_a_write_nobody_waits_for_is_seen_by_every_later_read_and_write(
    store: Store,
) -> None:
    store.write_soon(_put, "soon", b"s")
    assert await store.read(meta.get, "soon") == b"s"
    release, busy = await _held(store)
    store.write_soon(_put, "soon2", b"t")
    waited = asyncio.ensure_future(store.write_grouped(_put, "waited", b"w"))
    await asyncio.sleep(0)
    release.set()
    await busy
    await waited
    assert await store.read(meta.get, "soon2") == b"t"


async def test_a_write_nobody_waits_for_shares_the_commit_of_the_next_durable_write(
    store: Store,
) -> None:
    groups = store.group.groups
    store.write_soon(_put, "settle", b"s")  # as a send's settle record
    assert store.group.waiting == 1  # it waits for company
    assert await store.write_grouped(_put, "claim", b"c") == "claim"  # the next send's claim
    assert store.group.groups - groups == 1
    assert await store.read(meta.get, "settle") == b"s"


async def test_a_write_commits_the_records_queued_before_it_in_its_own_transaction(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_group, "SOON_S", 60.0)  # no flush by the clock meanwhile
    groups = store.group.groups
    store.write_soon(_put, "settle", b"s")
    assert await store.write(_put, "ingested", b"i") == "ingested"  # as ingest's commit
    assert store.group.waiting == 0  # taken along, not left for a group of its own
    assert store.group.groups == groups
    assert await store.read(meta.get, "settle") == b"s"

    store.write_soon(_put, "settle2", b"t")
    with pytest.raises(Conflict):
        await store.write(_refuse, "refused")
    assert store.group.waiting == 0
    assert await store.read(meta.get, "settle2") == b"t"  # the record commits regardless
    assert await store.read(meta.get, "refused") is None  # the refused write does not


async def test_a_write_apart_leaves_the_queued_records_for_a_later_commit(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_group, "SOON_S", 60.0)
    groups = store.group.groups
    store.write_soon(_put, "settle", b"s")
    assert await store.write_apart(_put, "taken", b"t") == "taken"  # as a long poll's take
    assert store.group.waiting == 1  # still waiting for company
    assert await store.write(_put, "ingested", b"i") == "ingested"
    assert store.group.waiting == 0
    assert store.group.groups == groups
    assert await store.read(meta.get, "settle") == b"s"


async def test_a_durable_write_takes_a_queued_write_along_and_cancels_its_timer(
    store: Store,
) -> None:
    groups = store.group.groups
    store.write_soon(_put, "soon", b"s")
    timer = store.group._soon_timer
    assert timer is not None and not timer.cancelled()

    await store.write_grouped(_put, "durable", b"d")

    # One commit for both; the timer that would have flushed the first is gone.
    assert store.group.groups == groups + 1
    assert timer.cancelled()
    assert await store.read(meta.get, "soon") == b"s"
