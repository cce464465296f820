"""How far each consumer has acknowledged: the inbox sequence below which nothing is
pending for it, so that finding pending messages does not read the whole history.

`through` is kept in `meta` under `acked_through:<consumer>`: every message at or
below it is acknowledged by that consumer or not receivable when it was passed (a
request's, a blocked inbox's, a left group's). New messages always take higher
sequences, and accepting a request gives its messages new ones (`release`); what
makes an older sequence receivable again (unblocking an inbox, accepting a group
this identity left) resets every consumer's point to 0 (`reset`), which the next
ack moves up again in one pass.
"""

from __future__ import annotations

from cone.store._db import Connection

_PREFIX = "acked_through:"


def through(conn: Connection, consumer: str) -> int:
    """The sequence at or below which nothing is pending for `consumer` (0: unknown)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_PREFIX + consumer,)).fetchone()
    return int.from_bytes(row[0], "big") if row else 0


def advance(conn: Connection, consumer: str, first_pending: int | None, was: int) -> int:
    """Record the point below `first_pending` (None: nothing pending, the head), and
    return it. `was` is the point read in this transaction: an unchanged point is not
    written again (a take with a waiter finds it unchanged, and each row written is
    pages to encrypt and sync in the commit that serves the waiter)."""
    if first_pending is None:
        (head,) = conn.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()
        point = int(head)
    else:
        point = first_pending - 1
    if point != was:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (_PREFIX + consumer, point.to_bytes(8, "big")),
        )
    return point


def reset(conn: Connection) -> None:
    """Older sequences may be receivable again: every consumer's point back to 0."""
    conn.execute("DELETE FROM meta WHERE key LIKE ?", (_PREFIX + "%",))
