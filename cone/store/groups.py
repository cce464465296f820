"""createGroup keys and leaving groups.

A key's row is written before libxmtp makes the group. States: `pending` (claimed;
`group_id` set once libxmtp has made the group locally), `settled` (the members were
added and the group published; the key returns its group forever).
"""

from __future__ import annotations

from dataclasses import dataclass

from cone.store._db import Connection


@dataclass(frozen=True)
class GroupKey:
    """One createGroup key's record."""

    key: str
    request: str  # the canonical request (JSON) the key was first used with
    group_id: str | None
    state: str
    last_error: str | None
    created_ns: int
    settled_ns: int | None


_COLUMNS = "key, request, group_id, state, last_error, created_ns, settled_ns"


def get(conn: Connection, key: str) -> GroupKey | None:
    """The record for `key`, or None."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM group_keys WHERE key = ?", (key,)).fetchone()
    return GroupKey(*row) if row else None


def claim(conn: Connection, key: str, request: str, now_ns: int) -> tuple[GroupKey, bool]:
    """The key's record, created if new; and whether it is new."""
    existing = get(conn, key)
    if existing is not None:
        return existing, False
    conn.execute(
        "INSERT INTO group_keys (key, request, state, created_ns) VALUES (?, ?, 'pending', ?)",
        (key, request, now_ns),
    )
    rec = get(conn, key)
    assert rec is not None
    return rec, True


def set_group(conn: Connection, key: str, group_id: str) -> None:
    """Record the group libxmtp made for the key."""
    conn.execute("UPDATE group_keys SET group_id = ? WHERE key = ?", (group_id, key))


def fail(conn: Connection, key: str, error: str) -> None:
    """Record why the last attempt did not finish (the caller retries with the key)."""
    conn.execute("UPDATE group_keys SET last_error = ? WHERE key = ?", (error, key))


def settle(conn: Connection, key: str, now_ns: int) -> None:
    """The group is published with its members."""
    conn.execute(
        "UPDATE group_keys SET state = 'settled', settled_ns = ?, last_error = NULL WHERE key = ?",
        (now_ns, key),
    )


def leave(conn: Connection, conversation_id: str) -> None:
    """Messages taken in from the group after now never become pending."""
    conn.execute(
        "UPDATE conversations SET left_seq = coalesce(left_seq,"
        " (SELECT coalesce(max(seq), 0) FROM messages), 0) WHERE id = ?",
        (conversation_id,),
    )
