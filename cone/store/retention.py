"""Deletions and disappearing messages: taking content out of cone's store.

A removed message keeps its row (its id stays known to ingest, so it is never taken
in again, and a consumer that holds it can still ack it); its content columns
(`CONTENT` in cone/store/records.py) are cleared and `removed` says why: `deleted` (its sender deleted it) or
`expired` (its conversation's disappearing setting). The store runs with
`secure_delete`, so cleared content is overwritten, and `checkpoint` folds the
write-ahead log back so that no older copy of a page stays in it.
"""

from __future__ import annotations

from collections.abc import Iterable

from cone.store._db import Connection
from cone.store.records import CONTENT_COLUMNS, Removed

# Everything a message carries of its content (its files are in `attachments`).
_CLEAR = ", ".join(f"{column} = NULL" for column in CONTENT_COLUMNS)


def _drop_files(conn: Connection, conversation_id: str) -> None:
    """Remove the files of the conversation's removed messages (bytes and remote keys)."""
    conn.execute(
        "DELETE FROM attachments WHERE message_id IN"
        " (SELECT id FROM messages WHERE conversation_id = ? AND removed IS NOT NULL)",
        (conversation_id,),
    )


def record_deletions(
    conn: Connection, conversation_id: str, deletions: Iterable[tuple[str, str]], now_ns: int
) -> None:
    """Remember (message id, sender inbox id) deletions a conversation carried."""
    conn.executemany(
        "INSERT OR IGNORE INTO deletions (message_id, conversation_id, sender_inbox_id,"
        " received_ns) VALUES (?, ?, ?, ?)",
        [(mid, conversation_id, sender, now_ns) for mid, sender in deletions],
    )


def apply_deletions(conn: Connection, conversation_id: str, now_ns: int) -> tuple[list[str], int]:
    """Clear the messages of a conversation their senders deleted; returns the ids
    cleared now and how many deletions still wait for their message."""
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT m.id FROM deletions d JOIN messages m ON m.id = d.message_id"
            " WHERE d.conversation_id = ? AND m.sender_inbox_id = d.sender_inbox_id"
            f" AND (m.removed IS NULL OR m.removed != '{Removed.DELETED}')",
            (conversation_id,),
        )
    ]
    conn.executemany(
        f"UPDATE messages SET {_CLEAR}, removed = '{Removed.DELETED}', removed_ns = ? WHERE id = ?",
        [(now_ns, mid) for mid in ids],
    )
    if ids:
        _drop_files(conn, conversation_id)
    (waiting,) = conn.execute(
        "SELECT count(*) FROM deletions d WHERE d.conversation_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = d.message_id)",
        (conversation_id,),
    ).fetchone()
    return ids, int(waiting)


def waiting_deletions(conn: Connection) -> set[str]:
    """Conversations with a deletion whose message has not arrived."""
    return {
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT d.conversation_id FROM deletions d"
            " WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = d.message_id)"
        )
    }


def set_disappearing(conn: Connection, settings: dict[str, tuple[int, int] | None]) -> bool:
    """Record conversations' disappearing settings (None: off); True if any changed."""
    changed = False
    for cid, setting in settings.items():
        row = conn.execute(
            "SELECT from_ns, in_ns FROM disappearing WHERE conversation_id = ?", (cid,)
        ).fetchone()
        current = (int(row[0]), int(row[1])) if row else None
        if current == setting:
            continue
        changed = True
        if setting is None:
            conn.execute("DELETE FROM disappearing WHERE conversation_id = ?", (cid,))
        else:
            conn.execute(
                "INSERT INTO disappearing (conversation_id, from_ns, in_ns) VALUES (?, ?, ?)"
                " ON CONFLICT (conversation_id) DO UPDATE SET from_ns = excluded.from_ns,"
                " in_ns = excluded.in_ns",
                (cid, *setting),
            )
    return changed


def disappearing(conn: Connection) -> dict[str, tuple[int, int]]:
    """Every conversation's disappearing setting in force."""
    return {
        r[0]: (int(r[1]), int(r[2]))
        for r in conn.execute("SELECT conversation_id, from_ns, in_ns FROM disappearing")
    }


def next_due(conn: Connection) -> int | None:
    """When the next message (inbox or own) expires, or None."""
    due: list[int] = []
    for cid, (from_ns, in_ns) in disappearing(conn).items():
        (inbound,) = conn.execute(
            "SELECT min(sent_at_ns) FROM messages WHERE conversation_id = ?"
            " AND removed IS NULL AND sent_at_ns >= ?",
            (cid, from_ns),
        ).fetchone()
        (own,) = conn.execute(
            "SELECT min(created_ns) FROM outbox WHERE conversation_id = ? AND state = 'settled'"
            " AND expired_ns IS NULL AND created_ns >= ?",
            (cid, from_ns),
        ).fetchone()
        due += [t + in_ns for t in (inbound, own) if t is not None]
    return min(due) if due else None


def expire(conn: Connection, now_ns: int) -> int:
    """Clear what the disappearing settings have expired by `now_ns`; how many."""
    total = 0
    for cid, (from_ns, in_ns) in disappearing(conn).items():
        cur = conn.execute(
            f"UPDATE messages SET {_CLEAR}, removed = '{Removed.EXPIRED}', removed_ns = ?"
            " WHERE conversation_id = ? AND removed IS NULL AND sent_at_ns >= ?"
            " AND sent_at_ns <= ?",
            (now_ns, cid, from_ns, now_ns - in_ns),
        )
        total += cur.rowcount
        if cur.rowcount:
            _drop_files(conn, cid)
        # A settled key keeps its message id (a retry still deduplicates); its payload goes.
        cur = conn.execute(
            "UPDATE outbox SET payload = x'', expired_ns = ? WHERE conversation_id = ?"
            " AND state = 'settled' AND expired_ns IS NULL AND created_ns >= ?"
            " AND created_ns <= ?",
            (now_ns, cid, from_ns, now_ns - in_ns),
        )
        total += cur.rowcount
    return total


def checkpoint(conn: Connection) -> None:
    """Fold the write-ahead log into the database and empty it (outside a transaction)."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
