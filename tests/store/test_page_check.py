"""The store's page-by-page check beside its work, and damage met by a read (real SQLCipher)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from cone.errors import StateError
from cone.store import PageCheck, Store, meta
from cone.store._db import PAGE_SIZE, Connection

KEY = bytes(range(32))


def _filled(path: Path, values: int) -> None:
    """A closed store holding `values` meta values of 3,000 random bytes (a page each)."""

    def fill(conn: Connection) -> None:
        for i in range(values):
            meta.put(conn, f"filler-{i}", os.urandom(3000))

    store = Store.open(path, KEY)
    store.write_now(fill)
    store.close()  # checkpointed: the file alone is the state


def _damage_last_page(path: Path) -> None:
    """The last page: no query of the meta values reads it, the check does."""
    with path.open("r+b") as f:
        f.seek(path.stat().st_size - 3000)
        f.write(os.urandom(32))


def _damage_values(path: Path) -> None:
    """Eight pages from 60% of the file on: among the filler values' pages."""
    pages = path.stat().st_size // PAGE_SIZE
    with path.open("r+b") as f:
        for page in range(pages * 6 // 10, pages * 6 // 10 + 8):
            f.seek(page * PAGE_SIZE + 1000)
            f.write(os.urandom(32))


async def test_an_intact_store_is_checked_and_said_to_be(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cone.db"
    _filled(path, 50)
    store = Store.open(path, KEY)
    check = PageCheck(path, KEY)
    with caplog.at_level(logging.INFO, logger="cone.store._check"):
        assert await check.run() is None
    assert check.damage is None
    assert "checked page by page" in caplog.text
    store.close()


async def test_a_damaged_page_the_open_never_read_is_found_and_named(tmp_path: Path) -> None:
    path = tmp_path / "cone.db"
    _filled(path, 50)
    _damage_last_page(path)
    store = Store.open(path, KEY)  # page 1 and the schema are intact: it opens
    check = PageCheck(path, KEY)
    damage = await check.run()
    assert damage is not None and check.damage is damage
    assert damage.reason == "corrupt_database"
    assert str(path) in damage.message and "cone restore" in damage.message
    store.close()


async def test_a_read_that_meets_a_damaged_page_is_named_as_damage(tmp_path: Path) -> None:
    """Before the check gets there, no call gets a damaged page's content: the read
    fails its authentication and says what to do, and the store goes on answering
    what does not touch that page."""
    path = tmp_path / "cone.db"
    _filled(path, 50)
    _damage_values(path)
    store = Store.open(path, KEY)
    with pytest.raises(StateError) as err:
        await store.read(lambda c: c.execute("SELECT key, value FROM meta").fetchall())
    assert err.value.reason == "corrupt_database"
    assert "cone restore" in err.value.message
    assert await store.read(meta.get, "filler-0") is not None
    store.close()


async def test_a_check_under_way_is_interrupted_at_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A host that stops (a one-shot command, a daemon stopped early) does not wait
    for a whole check of a big store."""
    path = tmp_path / "cone.db"
    _filled(path, 12_000)  # about 50 MB: a check of a few hundred ms at best
    check = PageCheck(path, KEY)
    with caplog.at_level(logging.INFO, logger="cone.store._check"):
        running = asyncio.create_task(check.run())
        while check._conn is None:  # noqa: ASYNC110 (a thread's state: under way)
            await asyncio.sleep(0.001)
        check.stop()
        assert check._thread is not None and not check._thread.is_alive()
        assert await running is None
    assert "stopped before it finished" in caplog.text  # cut short, not run to its end
    assert "checked page by page" not in caplog.text
    assert "could not be checked" not in caplog.text  # an interruption is no failure


async def test_a_check_stopped_before_it_started_never_runs(tmp_path: Path) -> None:
    path = tmp_path / "cone.db"
    _filled(path, 5)
    check = PageCheck(path, KEY)
    check.stop()
    assert await check.run() is None
    assert check._thread is None
