"""libxmtp's own database, opened as libxmtp opens it, and what cone keeps in it: an
index of its own and a faster text of libxmtp's conversation listing view (why:
cone/engine/_cursor_index.py, cone/engine/_listing_view.py); and one read, each
conversation's newest insert stamp (why: cone/engine/_stamps.py).

libxmtp writes SQLCipher 4 with a 32-byte plaintext header (the salt kept beside the
file, in `<db>.sqlcipher_salt`). The connection changes none of libxmtp's settings.

Never open it in a process where libxmtp has it open, or may still (a client closed
but not yet collected): libxmtp links its own copy of SQLite, and two copies in one
process break each other's POSIX locks on the file (closing one's descriptor drops the
other's locks), which corrupts it; seen in this project's tests as "database disk image
is malformed". `run` therefore does its work in a child process, which this file is
when run as a script: it imports nothing of cone's, so the child starts in about 30 ms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sqlcipher3 import dbapi2 as sqlcipher

#: libxmtp's plaintext header: the salt is not in the file, but beside it.
PLAINTEXT_HEADER_BYTES = 32
#: The index's table and columns (libxmtp's stored messages by conversation and cursor).
INDEXED = "group_messages (group_id, originator_id, sequence_id)"
#: SQLite's virtual-machine steps between two checks of a bound.
_CHECK_EVERY = 1000
#: How long a child may take beyond its work's own bound (its start, its opening).
CHILD_GRACE_S = 10.0
#: Each group's newest insert stamp (NULL: none stored) and its DM id, one seek of
#: libxmtp's index on (group_id, inserted_at_ns) each: 0.03 s warm at 10,000
#: conversations and 100,000 messages, 0.25 s warm and 0.9 s cold at 1,000,000.
GROUP_STAMPS = (
    "SELECT lower(hex(g.id)), g.dm_id, (SELECT max(m.inserted_at_ns) FROM group_messages m"
    " WHERE m.group_id = g.id) FROM groups g"
)


def open_xmtp_database(path: Path, key: bytes, *, busy_s: float = 5.0) -> sqlcipher.Connection:
    """A connection to libxmtp's existing database at `path` with its `key` (close it
    after), from a process where libxmtp does not have it open. Raises sqlcipher's
    DatabaseError when the key, the salt or the file is bad, OSError when the salt
    file is missing or `path` is a symbolic link."""
    if path.is_symlink():
        raise OSError(f"{path} is a symbolic link")
    salt = Path(f"{path}.sqlcipher_salt").read_text().strip()
    bytes.fromhex(salt)  # a salt that is not hex never reaches the pragma
    conn = sqlcipher.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA cipher_log_level = NONE")
        conn.execute(f"PRAGMA key = \"x'{key.hex()}'\"")
        conn.execute(f"PRAGMA cipher_plaintext_header_size = {PLAINTEXT_HEADER_BYTES}")
        conn.execute(f"PRAGMA cipher_salt = \"x'{salt}'\"")
        conn.execute(f"PRAGMA busy_timeout = {int(busy_s * 1000)}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the key opens it
    except BaseException:
        conn.close()
        raise
    return conn


def rotate_group_keys_at_next_use(conn: sqlcipher.Connection) -> list[str]:
    """Make libxmtp rotate every group's keys before it next uses them; returns the
    groups' ids (lowercase hex).

    For a restored copy (cone/store/backup.py): the original may have used keys after
    the backup that this copy's state would use again. Each group's `rotated_at_ns`
    at 0 makes libxmtp queue a key update (a commit: a new epoch, new sending keys)
    before the next message it sends there, its own 30-day rotation.

    The key package is left to libxmtp's own schedule: a rotation forced at the
    restored start made the members refuse that copy's key updates (seen on the
    devnet with libxmtp 1.10: the message after it never arrived)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("UPDATE groups SET rotated_at_ns = 0")
        ids = [str(r[0]) for r in conn.execute("SELECT lower(hex(id)) FROM groups")]
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return ids


def newest_stamps(conn: sqlcipher.Connection) -> dict[str, int]:
    """Each conversation's newest insert stamp (0: none stored), by group id. A DM's
    messages are those of every group with its DM id (libxmtp stitches the DMs two
    inboxes made into one conversation, and reads them all for any of their ids)."""
    rows = conn.execute(GROUP_STAMPS).fetchall()
    by_dm: dict[str, int] = {}
    for _, dm_id, stamp in rows:
        if dm_id is not None:
            by_dm[dm_id] = max(by_dm.get(dm_id, 0), stamp or 0)
    return {gid: by_dm[dm_id] if dm_id is not None else stamp or 0 for gid, dm_id, stamp in rows}


def _indexes(conn: sqlcipher.Connection, prefix: str) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND substr(name, 1, ?) = ?",
        (len(prefix), prefix),
    ).fetchall()
    return [name for (name,) in rows]


def _view_sql(conn: sqlcipher.Connection, name: str) -> str | None:
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?", (name,)
    ).fetchone()
    return None if row is None else str(row[0])


def _swap_view(conn: sqlcipher.Connection, view: dict[str, str], into: str) -> None:
    """Replace the view `view["name"]` by the text `into`, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(f'DROP VIEW "{view["name"]}"')
        conn.execute(into)
    except BaseException:
        if conn.in_transaction:  # an interrupted statement rolls it back itself
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _keep_view(conn: sqlcipher.Connection, view: dict[str, str], action: str) -> dict[str, Any]:
    """`drop_stale`: a view of cone's made for another libxmtp build (its text has
    `mark` and is not `ours`) gets `original` back; `make`: a view whose text is
    exactly `original` becomes `ours`. Any other text is libxmtp's own: left."""
    current = _view_sql(conn, view["name"])
    if action == "drop_stale":
        if current is not None and view["mark"] in current and current != view["ours"]:
            _swap_view(conn, view, view["original"])
            current = view["original"]
    elif current == view["original"]:
        _swap_view(conn, view, view["ours"])
        return {"view": "made"}
    if current == view["ours"]:
        return {"view": "ours"}
    return {"view": "original" if current == view["original"] else "foreign"}


def _work(request: dict[str, Any]) -> dict[str, Any]:
    """What the child does: `drop_stale` the indexes named with `prefix` but `name`;
    `make` the index `name` within `bound_s`; and with `view`, the same for a view
    (`_keep_view`); `newest`, read `newest_stamps` within `bound_s`. Each stops,
    rolled back, once the process `parent` has ended: left running after a kill -9 of
    the daemon, it would hold the lock the next start's libxmtp waits on."""
    parent = request["parent"]
    started = time.monotonic()
    deadline = started + float(request.get("bound_s", "inf"))

    def given_up() -> str | None:
        if os.getppid() != parent:
            return "cone's process ended"
        if time.monotonic() > deadline:
            return f"given up after {request['bound_s']} s"
        return None

    conn = open_xmtp_database(Path(request["path"]), bytes.fromhex(request["key"]))
    # Nonzero from the handler interrupts the statement, which then rolls back.
    conn.set_progress_handler(lambda: given_up() is not None, _CHECK_EVERY)
    try:
        if request["action"] == "newest":
            return {"newest": newest_stamps(conn)}
        prefix, name = request["prefix"], request["name"]
        view = _keep_view(conn, request["view"], request["action"]) if "view" in request else {}
        if request["action"] == "drop_stale":
            dropped = [n for n in _indexes(conn, prefix) if n != name]
            for stale in dropped:
                conn.execute(f'DROP INDEX IF EXISTS "{stale}"')
            return {"dropped": dropped, "has": name in _indexes(conn, prefix), **view}
        made = name not in _indexes(conn, prefix)
        conn.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON {INDEXED}')
        return {"made": made, "seconds": time.monotonic() - started, **view}
    except sqlcipher.OperationalError:
        why = given_up()
        if why is None:
            raise
        return {"error": why}
    finally:
        conn.close()


def run(request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Do `request` (see `_work`; `key` as hex) in a child process, killed after
    `timeout_s`. Its outcome, or {"error": why}."""
    try:
        done = subprocess.run(
            [sys.executable, "-I", __file__],
            input=json.dumps({**request, "parent": os.getpid()}),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": str(exc)}
    try:
        outcome: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        return {"error": (done.stderr.strip().splitlines() or ["no answer"])[-1]}
    return outcome


def _main() -> None:
    try:
        outcome = _work(json.loads(sys.stdin.read()))
    except Exception as exc:
        outcome = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(outcome))


if __name__ == "__main__":
    _main()


__all__ = ["CHILD_GRACE_S", "INDEXED", "newest_stamps", "open_xmtp_database", "run"]
