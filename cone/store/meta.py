"""Small named values: the identity, keys and cursors."""

from __future__ import annotations

from cone.store._db import Connection


def get(conn: Connection, key: str) -> bytes | None:
    """The value under `key`, or None."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return bytes(row[0]) if row else None


def put(conn: Connection, key: str, value: bytes) -> None:
    """Set `key` to `value`."""
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )
