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


def remove(conn: Connection, key: str) -> None:
    """Remove `key` (nothing when it is not there)."""
    conn.execute("DELETE FROM meta WHERE key = ?", (key,))


def keys_with_prefix(conn: Connection, prefix: str) -> list[str]:
    """Every key that starts with `prefix`, the prefix cut off, sorted."""
    rows = conn.execute(
        "SELECT substr(key, ?) FROM meta WHERE substr(key, 1, ?) = ? ORDER BY key",
        (len(prefix) + 1, len(prefix), prefix),
    ).fetchall()
    return [str(r[0]) for r in rows]
