"""The devnet's state: SQLite, in memory by default or in a file that survives restarts.

Every method runs on the event loop's thread and returns before anything else
runs, so ids are assigned in acceptance order without locks, and whatever a call
stores is visible to the next query. Each write is one transaction: a request
that fails validation or storage leaves nothing behind.

File durability: WAL with `synchronous=NORMAL`, so a committed call survives the
process being killed; the last calls before an OS crash or power loss may be
lost (this is a test node). The file is opened in exclusive locking mode, so a
second devnet on the same file fails at start instead of interleaving ids.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Final

from cone.devnet.paging import Page
from cone.devnet.topics import (
    ORIGINATOR_COMMITS,
    ORIGINATOR_V3_KEY_PACKAGES,
    ORIGINATOR_V3_MESSAGES,
    ORIGINATOR_V3_WELCOMES,
)
from cone.errors import StateError

SCHEMA_VERSION: Final = 2

_SCHEMA: Final = """
CREATE TABLE identity_updates (
  sequence_id INTEGER PRIMARY KEY AUTOINCREMENT,
  inbox_id TEXT NOT NULL,
  server_timestamp_ns INTEGER NOT NULL,
  update_bytes BLOB NOT NULL
);
CREATE INDEX identity_updates_by_inbox ON identity_updates (inbox_id, sequence_id);
CREATE TABLE address_log (
  kind INTEGER NOT NULL,
  identifier TEXT NOT NULL,
  inbox_id TEXT NOT NULL,
  association_seq INTEGER NOT NULL,
  revocation_seq INTEGER
);
CREATE INDEX address_log_by_identifier ON address_log (kind, identifier, association_seq);
CREATE TABLE key_packages (
  installation_key BLOB PRIMARY KEY,
  key_package BLOB NOT NULL,
  updated_ns INTEGER NOT NULL
);
CREATE TABLE group_messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_ns INTEGER NOT NULL,
  group_id BLOB NOT NULL,
  data BLOB NOT NULL,
  sender_hmac BLOB NOT NULL,
  should_push INTEGER NOT NULL,
  is_commit INTEGER NOT NULL,
  dedup BLOB NOT NULL UNIQUE
);
CREATE INDEX group_messages_by_group ON group_messages (group_id, id);
CREATE TABLE welcomes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_ns INTEGER NOT NULL,
  installation_key BLOB NOT NULL,
  is_pointer INTEGER NOT NULL,
  data BLOB NOT NULL,
  hpke_public_key BLOB NOT NULL,
  wrapper_algorithm INTEGER NOT NULL,
  welcome_metadata BLOB NOT NULL,
  dedup BLOB NOT NULL UNIQUE
);
CREATE INDEX welcomes_by_key ON welcomes (installation_key, id);
CREATE TABLE commit_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  group_id BLOB NOT NULL,
  entry BLOB NOT NULL,
  signature BLOB NOT NULL,
  dedup BLOB NOT NULL UNIQUE
);
CREATE INDEX commit_log_by_group ON commit_log (group_id, id);
"""

#: Schema 2: what the D14N view needs (cone/devnet/topics.py). `node_id` is the
#: D14N node a row was published through, 0 for the V3 API; `depends_on` is the
#: serialized D14N cursor a group message's publisher declared (empty via V3).
_SCHEMA_2: Final = """
ALTER TABLE group_messages ADD COLUMN node_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE group_messages ADD COLUMN depends_on BLOB NOT NULL DEFAULT x'';
ALTER TABLE welcomes ADD COLUMN node_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE key_packages ADD COLUMN node_id INTEGER NOT NULL DEFAULT 0;
"""

#: A group message's D14N originator, in SQL (see cone/devnet/topics.py).
_GROUP_ORIGINATOR: Final = (
    f"CASE WHEN is_commit THEN {ORIGINATOR_COMMITS}"
    f" WHEN node_id = 0 THEN {ORIGINATOR_V3_MESSAGES} ELSE node_id END"
)
#: A welcome's D14N originator, in SQL.
_WELCOME_ORIGINATOR: Final = f"CASE WHEN node_id = 0 THEN {ORIGINATOR_V3_WELCOMES} ELSE node_id END"


@dataclass(frozen=True, slots=True)
class IdentityUpdateRow:
    """One stored identity update."""

    sequence_id: int
    server_timestamp_ns: int
    update: bytes


@dataclass(frozen=True, slots=True)
class GroupMessageRow:
    """One stored group message (also the input, with id and created_ns 0)."""

    id: int
    created_ns: int
    group_id: bytes
    data: bytes
    sender_hmac: bytes
    should_push: bool
    is_commit: bool
    node_id: int = 0
    depends_on: bytes = b""

    @property
    def topic(self) -> bytes:
        """The stream topic: the group id."""
        return self.group_id

    @property
    def originator(self) -> int:
        """The D14N originator (cone/devnet/topics.py)."""
        if self.is_commit:
            return ORIGINATOR_COMMITS
        return self.node_id or ORIGINATOR_V3_MESSAGES


@dataclass(frozen=True, slots=True)
class WelcomeRow:
    """One stored welcome or welcome pointer (also the input, with id and created_ns 0).

    For a pointer, `data` holds the wrapped pointer."""

    id: int
    created_ns: int
    installation_key: bytes
    is_pointer: bool
    data: bytes
    hpke_public_key: bytes
    wrapper_algorithm: int
    welcome_metadata: bytes
    node_id: int = 0

    @property
    def topic(self) -> bytes:
        """The stream topic: the recipient key."""
        return self.installation_key

    @property
    def originator(self) -> int:
        """The D14N originator (cone/devnet/topics.py)."""
        return self.node_id or ORIGINATOR_V3_WELCOMES


@dataclass(frozen=True, slots=True)
class KeyPackageRow:
    """An installation's newest key package."""

    id: int
    updated_ns: int
    installation_key: bytes
    key_package: bytes
    node_id: int

    @property
    def originator(self) -> int:
        """The D14N originator (cone/devnet/topics.py)."""
        return self.node_id or ORIGINATOR_V3_KEY_PACKAGES


@dataclass(frozen=True, slots=True)
class CommitLogRow:
    """One stored commit-log entry (also the input, with id 0)."""

    id: int
    group_id: bytes
    entry: bytes
    signature: bytes


@dataclass(frozen=True, slots=True)
class AddressChange:
    """An identifier associated with, or revoked from, an inbox by an update."""

    kind: int
    identifier: str
    revoke: bool


class Store:
    """The devnet's tables, behind typed methods."""

    def __init__(self, path: str | None = None) -> None:
        """Open `path` (created if absent), or a fresh in-memory database for None."""
        self.path = path
        try:
            # No busy wait: the only other user of the file would be a second devnet.
            self._db = sqlite3.connect(path or ":memory:", isolation_level=None, timeout=0)
            self._configure()
            self._migrate()
            # The newest row ids (per originator) of each group and welcome topic
            # asked about, kept as rows are added: a client's stream over all its
            # conversations is opened again for each new one, naming every topic.
            self._newest: dict[tuple[str, bytes], dict[int, int]] = {}
        except sqlite3.OperationalError as exc:
            raise StateError(
                f"cannot open the devnet database {path}: {exc} (is another devnet using it?)",
                reason="devnet_db_unavailable",
            ) from exc

    def _configure(self) -> None:
        if self.path is None:
            return
        # Exclusive: one devnet per file. WAL + NORMAL: a commit survives a killed process.
        self._db.execute("PRAGMA locking_mode = EXCLUSIVE")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")

    def _migrate(self) -> None:
        with self._write():
            (version,) = self._db.execute("PRAGMA user_version").fetchone()
            if version > SCHEMA_VERSION:
                raise StateError(
                    f"the devnet database {self.path} has schema {version}, newer than "
                    f"this cone's {SCHEMA_VERSION}: use a newer cone or another file",
                    reason="devnet_db_too_new",
                )
            # One step at a time: a version-1 file gains schema 2's columns.
            for step, script in ((1, _SCHEMA), (2, _SCHEMA_2)):
                if version < step:
                    for statement in script.split(";"):
                        if statement.strip():
                            self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the database; later calls fail."""
        self._db.close()

    @contextmanager
    def _write(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # identity

    def identity_update_count(self, inbox_id: str) -> int:
        """How many updates the inbox's log holds."""
        (count,) = self._db.execute(
            "SELECT count(*) FROM identity_updates WHERE inbox_id = ?", (inbox_id,)
        ).fetchone()
        return int(count)

    def append_identity_update(
        self, inbox_id: str, update: bytes, now_ns: int, changes: Sequence[AddressChange]
    ) -> int:
        """Append an update and apply its address changes; returns its sequence id."""
        with self._write():
            cur = self._db.execute(
                "INSERT INTO identity_updates (inbox_id, server_timestamp_ns, update_bytes)"
                " VALUES (?, ?, ?)",
                (inbox_id, now_ns, update),
            )
            seq = int(cur.lastrowid or 0)
            for change in changes:
                if change.revoke:
                    self._db.execute(
                        "UPDATE address_log SET revocation_seq = ? WHERE rowid = ("
                        " SELECT rowid FROM address_log WHERE kind = ? AND identifier = ?"
                        " AND inbox_id = ? AND revocation_seq IS NULL"
                        " ORDER BY association_seq DESC LIMIT 1)",
                        (seq, change.kind, change.identifier, inbox_id),
                    )
                else:
                    self._db.execute(
                        "INSERT INTO address_log (kind, identifier, inbox_id, association_seq)"
                        " VALUES (?, ?, ?, ?)",
                        (change.kind, change.identifier, inbox_id, seq),
                    )
        return seq

    def identity_updates(self, inbox_id: str, after: int) -> list[IdentityUpdateRow]:
        """The inbox's updates with sequence ids above `after`, ascending."""
        rows = self._db.execute(
            "SELECT sequence_id, server_timestamp_ns, update_bytes FROM identity_updates"
            " WHERE inbox_id = ? AND sequence_id > ? ORDER BY sequence_id",
            (inbox_id, after),
        ).fetchall()
        return [IdentityUpdateRow(*row) for row in rows]

    def newest_identity_update(self, inbox_id: str) -> IdentityUpdateRow | None:
        """The inbox's newest update, if any."""
        row = self._db.execute(
            "SELECT sequence_id, server_timestamp_ns, update_bytes FROM identity_updates"
            " WHERE inbox_id = ? ORDER BY sequence_id DESC LIMIT 1",
            (inbox_id,),
        ).fetchone()
        return None if row is None else IdentityUpdateRow(*row)

    def inbox_for(self, kind: int, identifier: str) -> str | None:
        """The inbox of the newest association of the identifier not revoked since."""
        row = self._db.execute(
            "SELECT inbox_id FROM address_log WHERE kind = ? AND identifier = ?"
            " AND revocation_seq IS NULL ORDER BY association_seq DESC LIMIT 1",
            (kind, identifier),
        ).fetchone()
        return None if row is None else str(row[0])

    # key packages

    def put_key_package(
        self, installation_key: bytes, key_package: bytes, now_ns: int, node_id: int = 0
    ) -> None:
        """Store the installation's newest key package (`node_id`: see the row's)."""
        with self._write():
            self._db.execute(
                "INSERT INTO key_packages (installation_key, key_package, updated_ns, node_id)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (installation_key) DO UPDATE"
                " SET key_package = excluded.key_package, updated_ns = excluded.updated_ns,"
                " node_id = excluded.node_id",
                (installation_key, key_package, now_ns, node_id),
            )

    def key_package_row(self, installation_key: bytes) -> KeyPackageRow | None:
        """The installation's newest key package with its row id and origin, if any."""
        row = self._db.execute(
            "SELECT rowid, updated_ns, installation_key, key_package, node_id"
            " FROM key_packages WHERE installation_key = ?",
            (installation_key,),
        ).fetchone()
        return None if row is None else KeyPackageRow(*row)

    def key_package(self, installation_key: bytes) -> bytes | None:
        """The installation's newest key package, if any."""
        row = self._db.execute(
            "SELECT key_package FROM key_packages WHERE installation_key = ?",
            (installation_key,),
        ).fetchone()
        return None if row is None else bytes(row[0])

    # group messages

    def add_group_messages(
        self, messages: Sequence[GroupMessageRow], now_ns: int
    ) -> list[GroupMessageRow]:
        """Store messages not stored before (by `dedup`); returns the new ones with ids."""
        added: list[GroupMessageRow] = []
        with self._write():
            for m in messages:
                cur = self._db.execute(
                    "INSERT INTO group_messages (created_ns, group_id, data, sender_hmac,"
                    " should_push, is_commit, dedup, node_id, depends_on)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dedup) DO NOTHING",
                    (
                        now_ns,
                        m.group_id,
                        m.data,
                        m.sender_hmac,
                        m.should_push,
                        m.is_commit,
                        _dedup(m.group_id, m.data),
                        m.node_id,
                        m.depends_on,
                    ),
                )
                if cur.rowcount == 1:
                    added.append(replace(m, id=int(cur.lastrowid or 0), created_ns=now_ns))
        self._note_newest(_GROUPS, added)
        return added

    def group_messages(self, group_id: bytes, page: Page) -> list[GroupMessageRow]:
        """One page of the group's messages."""
        rows = self._page(f"{_GROUP_SELECT} WHERE group_id = ?", group_id, page)
        return [_group_row(r) for r in rows]

    def group_envelopes(
        self, group_id: bytes, cursor: Mapping[int, int], after: int, limit: int
    ) -> list[GroupMessageRow]:
        """The group's messages above `cursor` (D14N originator to sequence id) and
        above id `after`, in id order, at most `limit`."""
        rows = self._above(_GROUP_SELECT, "group_id", group_id, _GROUP_ORIGINATOR, cursor,
                           after, limit)  # fmt: skip
        return [_group_row(r) for r in rows]

    def newest_group_message(self, group_id: bytes) -> GroupMessageRow | None:
        """The group's message with the highest id, if any."""
        rows = self.group_messages(group_id, Page(ascending=False, limit=1, cursor=0))
        return rows[0] if rows else None

    # welcomes

    def add_welcomes(self, welcomes: Sequence[WelcomeRow], now_ns: int) -> list[WelcomeRow]:
        """Store welcomes not stored before (by `dedup`); returns the new ones with ids."""
        added: list[WelcomeRow] = []
        with self._write():
            for w in welcomes:
                cur = self._db.execute(
                    "INSERT INTO welcomes (created_ns, installation_key, is_pointer, data,"
                    " hpke_public_key, wrapper_algorithm, welcome_metadata, dedup, node_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dedup) DO NOTHING",
                    (
                        now_ns,
                        w.installation_key,
                        w.is_pointer,
                        w.data,
                        w.hpke_public_key,
                        w.wrapper_algorithm,
                        w.welcome_metadata,
                        _dedup(w.installation_key, w.data),
                        w.node_id,
                    ),
                )
                if cur.rowcount == 1:
                    added.append(replace(w, id=int(cur.lastrowid or 0), created_ns=now_ns))
        self._note_newest(_WELCOMES, added)
        return added

    def welcomes(self, installation_key: bytes, page: Page) -> list[WelcomeRow]:
        """One page of the welcomes stored under the key."""
        rows = self._page(f"{_WELCOME_SELECT} WHERE installation_key = ?", installation_key, page)
        return [_welcome_row(r) for r in rows]

    def welcome_envelopes(
        self, installation_key: bytes, cursor: Mapping[int, int], after: int, limit: int
    ) -> list[WelcomeRow]:
        """The key's welcomes above `cursor` (D14N originator to sequence id) and
        above id `after`, in id order, at most `limit`."""
        rows = self._above(_WELCOME_SELECT, "installation_key", installation_key,
                           _WELCOME_ORIGINATOR, cursor, after, limit)  # fmt: skip
        return [_welcome_row(r) for r in rows]

    def newest_welcome(self, installation_key: bytes) -> WelcomeRow | None:
        """The key's welcome with the highest id, if any."""
        rows = self.welcomes(installation_key, Page(ascending=False, limit=1, cursor=0))
        return rows[0] if rows else None

    # newest ids

    def newest_group_message_ids(self, group_id: bytes) -> Mapping[int, int]:
        """The highest id of the group's messages from each D14N originator ({} if
        none): a query the first time, then from memory."""
        return self._newest_ids(_GROUPS, group_id)

    def newest_welcome_ids(self, installation_key: bytes) -> Mapping[int, int]:
        """The highest id of the key's welcomes from each originator (as above)."""
        return self._newest_ids(_WELCOMES, installation_key)

    def _newest_ids(self, table: str, topic: bytes) -> dict[int, int]:
        newest = self._newest.get((table, topic))
        if newest is None:
            column, originator = _NEWEST_BY[table]
            rows = self._db.execute(
                f"SELECT {originator}, max(id) FROM {table} WHERE {column} = ? GROUP BY 1",
                (topic,),
            ).fetchall()
            newest = self._newest[(table, topic)] = {int(o): int(i) for o, i in rows}
        return newest

    def _note_newest(self, table: str, added: Sequence[GroupMessageRow | WelcomeRow]) -> None:
        # After the commit: ids only grow, so a row added is its originator's newest.
        for row in added:
            newest = self._newest.get((table, row.topic))
            if newest is not None:
                newest[row.originator] = row.id

    # commit log

    def add_commit_log_entries(self, entries: Sequence[CommitLogRow]) -> int:
        """Append entries not stored before (by `dedup`); returns how many were new."""
        added = 0
        with self._write():
            for e in entries:
                cur = self._db.execute(
                    "INSERT INTO commit_log (group_id, entry, signature, dedup)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (dedup) DO NOTHING",
                    (e.group_id, e.entry, e.signature, _dedup(e.group_id, e.entry)),
                )
                added += cur.rowcount
        return added

    def commit_log(self, group_id: bytes, page: Page) -> list[CommitLogRow]:
        """One page of the group's commit log."""
        rows = self._page(
            "SELECT id, group_id, entry, signature FROM commit_log WHERE group_id = ?",
            group_id,
            page,
        )
        return [CommitLogRow(*row) for row in rows]

    def _above(
        self, select: str, column: str, key: bytes, originator: str,
        cursor: Mapping[int, int], after: int, limit: int,
    ) -> list[Any]:  # fmt: skip
        """Rows of `key` whose id is above `after` and above the cursor's entry for
        the row's originator (an absent originator counts as 0), in id order."""
        params: list[object] = [key, after]
        above = "0"
        if cursor:
            whens = " ".join("WHEN ? THEN ?" for _ in cursor)
            above = f"CASE ({originator}) {whens} ELSE 0 END"
            for node, seq in cursor.items():
                params += [node, seq]
        rows: list[Any] = self._db.execute(
            f"{select} WHERE {column} = ? AND id > ? AND id > {above} ORDER BY id LIMIT ?",
            (*params, limit),
        ).fetchall()
        return rows

    def _page(self, select: str, key: bytes, page: Page) -> list[Any]:
        order = "ASC" if page.ascending else "DESC"
        params: tuple[object, ...] = (key,)
        if page.cursor > 0:
            select += " AND id > ?" if page.ascending else " AND id < ?"
            params += (page.cursor,)
        rows: list[Any] = self._db.execute(
            f"{select} ORDER BY id {order} LIMIT ?", (*params, page.limit)
        ).fetchall()
        return rows


#: The tables `_newest_ids` reads: the column each keeps its topic in, and its
#: rows' originator in SQL.
_GROUPS: Final = "group_messages"
_WELCOMES: Final = "welcomes"
_NEWEST_BY: Final = {
    _GROUPS: ("group_id", _GROUP_ORIGINATOR),
    _WELCOMES: ("installation_key", _WELCOME_ORIGINATOR),
}

_GROUP_SELECT: Final = (
    "SELECT id, created_ns, group_id, data, sender_hmac, should_push, is_commit, node_id,"
    " depends_on FROM group_messages"
)
_WELCOME_SELECT: Final = (
    "SELECT id, created_ns, installation_key, is_pointer, data, hpke_public_key,"
    " wrapper_algorithm, welcome_metadata, node_id FROM welcomes"
)


def _group_row(r: Any) -> GroupMessageRow:
    return GroupMessageRow(r[0], r[1], r[2], r[3], r[4], bool(r[5]), bool(r[6]), r[7], r[8])


def _welcome_row(r: Any) -> WelcomeRow:
    return WelcomeRow(r[0], r[1], r[2], bool(r[3]), r[4], r[5], r[6], r[7], r[8])


def _dedup(key: bytes, payload: bytes) -> bytes:
    """The uniqueness key of a stored payload: sha256(key ‖ payload), as the reference
    node uses, so a retried publish is stored once."""
    return hashlib.sha256(key + payload).digest()
