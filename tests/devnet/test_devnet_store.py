"""The devnet's SQLite store: persistence, one devnet per file, schema versions, and
the newest ids per topic that spare a stream's catch-up its reads."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from cone.devnet.paging import Page
from cone.devnet.store import AddressChange, GroupMessageRow, Store, WelcomeRow
from cone.devnet.topics import ORIGINATOR_COMMITS, ORIGINATOR_V3_MESSAGES, ORIGINATOR_V3_WELCOMES
from cone.errors import StateError

_ALL = Page(ascending=True, limit=100, cursor=0)


def test_state_in_a_file_survives_reopening(tmp_path: Path) -> None:
    path = str(tmp_path / "devnet.db")
    store = Store(path)
    store.add_group_messages([GroupMessageRow(0, 0, b"g", b"m1", b"", False, True)], 5)
    store.append_identity_update("i" * 64, b"u", 6, [AddressChange(1, "0xabc", False)])
    store.put_key_package(b"k", b"kp", 7)
    store.close()

    reopened = Store(path)
    try:
        (row,) = reopened.group_messages(b"g", _ALL)
        assert (row.id, row.created_ns, row.data, row.is_commit) == (1, 5, b"m1", True)
        assert reopened.inbox_for(1, "0xabc") == "i" * 64
        assert reopened.key_package(b"k") == b"kp"
        added = reopened.add_group_messages(
            [GroupMessageRow(0, 0, b"g", b"m2", b"", False, False)], 8
        )
        assert [r.id for r in added] == [2]  # ids continue, never reused
    finally:
        reopened.close()


def test_a_second_devnet_cannot_open_a_file_in_use(tmp_path: Path) -> None:
    path = str(tmp_path / "devnet.db")
    first = Store(path)
    try:
        with pytest.raises(StateError, match="another devnet"):
            Store(path)
    finally:
        first.close()


def test_a_database_from_a_newer_devnet_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "devnet.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StateError, match="newer"):
        Store(str(path))


def test_a_failed_write_leaves_nothing_behind() -> None:
    store = Store()
    try:
        good = GroupMessageRow(0, 0, b"g", b"ok", b"", False, False)
        bad = GroupMessageRow(0, 0, b"g", b"bad", None, False, False)  # NULL breaks NOT NULL
        assert store.newest_group_message_ids(b"g") == {}
        with pytest.raises(sqlite3.IntegrityError):
            store.add_group_messages([good, bad], 1)
        assert store.group_messages(b"g", _ALL) == []
        assert store.newest_group_message_ids(b"g") == {}  # nor in memory
    finally:
        store.close()


def test_a_topics_newest_ids_are_read_once_and_kept_as_rows_arrive(tmp_path: Path) -> None:
    path = str(tmp_path / "devnet.db")
    store = Store(path)
    message = GroupMessageRow(0, 0, b"g", b"m1", b"", False, False)
    store.add_group_messages([message, replace(message, data=b"c1", is_commit=True)], 1)
    store.add_group_messages([replace(message, group_id=b"h", data=b"m2")], 2)
    store.add_welcomes([WelcomeRow(0, 0, b"k", False, b"w1", b"p", 0, b"")], 3)
    store.close()

    store = Store(path)  # read from the file the first time
    try:
        assert store.newest_group_message_ids(b"g") == {
            ORIGINATOR_V3_MESSAGES: 1,
            ORIGINATOR_COMMITS: 2,
        }
        assert store.newest_group_message_ids(b"h") == {ORIGINATOR_V3_MESSAGES: 3}
        assert store.newest_group_message_ids(b"none") == {}
        assert store.newest_welcome_ids(b"k") == {ORIGINATOR_V3_WELCOMES: 1}
        # Then kept in memory as rows are added, each under its originator, a repeat
        # (stored once) changing nothing.
        (m3,) = store.add_group_messages([replace(message, data=b"m3"), message], 4)
        new = replace(message, group_id=b"none", data=b"m4", node_id=100)
        (m4,) = store.add_group_messages([new], 5)
        w2 = WelcomeRow(0, 0, b"k", False, b"w2", b"p", 0, b"", node_id=100)
        (w,) = store.add_welcomes([w2], 6)
        assert store.newest_group_message_ids(b"g") == {
            ORIGINATOR_V3_MESSAGES: m3.id,
            ORIGINATOR_COMMITS: 2,
        }
        assert store.newest_group_message_ids(b"none") == {100: m4.id}
        assert store.newest_welcome_ids(b"k") == {ORIGINATOR_V3_WELCOMES: 1, 100: w.id}
        assert store.newest_group_message_ids(b"h") == {ORIGINATOR_V3_MESSAGES: 3}
    finally:
        store.close()
