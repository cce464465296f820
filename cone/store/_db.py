"""Opening cone's SQLCipher database: the key, the pragmas, and their order."""

from __future__ import annotations

import os
from pathlib import Path

from sqlcipher3 import dbapi2 as sqlcipher

from cone._fs import make_private, open_nofollow, refuse_link
from cone.errors import StateError

Connection = sqlcipher.Connection
#: SQLCipher 4's page size (cipher_compatibility = 4).
PAGE_SIZE = 4096
DatabaseError = sqlcipher.DatabaseError


def limit_clause(rows: int) -> str:
    """`LIMIT rows` as a literal. SQLCipher's SQLite is built with STAT4, under which a
    bound LIMIT (`LIMIT ?`) has its statement prepared again at every execution: 30-40
    µs for the pending-messages query, ten times what running it costs, about 20 µs for
    a page of history. A literal costs a statement text per distinct value, each
    prepared once into the connection's statement cache: a client that changes its
    limit at every call costs what every call cost before."""
    return f"LIMIT {int(rows)}"


def corrupt(path: Path, detail: str) -> StateError:
    """The error that names `path` as damaged, with what to do."""
    return StateError(
        f"{path} is damaged ({detail}); the key is right but the file is not intact. "
        "Restore the identity from a backup (cone restore FILE --home NEW_HOME) and start "
        "there; keep the damaged directory for inspection",
        reason="corrupt_database",
    )


#: SQLite's result codes for a file that is not intact: SQLITE_CORRUPT, and
#: SQLITE_NOTADB, which is what SQLCipher answers for a page that fails its
#: authentication once the key has opened page 1.
_DAMAGE_CODES = frozenset({11, 26})


def is_damage(exc: BaseException) -> bool:
    """Whether `exc` is SQLite's word for a damaged file (under a key already verified)."""
    return getattr(exc, "sqlite_errorcode", None) in _DAMAGE_CODES


def _damaged_pages(conn: sqlcipher.Connection, path: Path) -> str | None:
    """Which pages fail SQLCipher's authentication, when page 1 would not open: a wrong
    key fails every page, a damaged file only some (None when all fail or none)."""
    try:
        failed = [row[0] for row in conn.execute("PRAGMA cipher_integrity_check").fetchall()]
    except DatabaseError:
        return None
    pages = max(1, path.stat().st_size // PAGE_SIZE)
    if not failed or len(failed) >= pages:
        return None
    return f"{len(failed)} of {pages} pages, such as: {failed[0]}"


def keyed_connection(path: Path, key: bytes) -> sqlcipher.Connection:
    """A connection to the existing store at `path`, keyed with `key` and its key
    verified (page 1 and the schema read). Raises StateError: wrong_key, or
    corrupt_database when only some pages fail their authentication."""
    # isolation_level=None: we issue BEGIN IMMEDIATE ourselves (see Store.write).
    conn = sqlcipher.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        # Silence SQLCipher's own stderr logging; failures surface as exceptions.
        conn.execute("PRAGMA cipher_log_level = NONE")
        # The key comes first: nothing can be read or written before it.
        conn.execute(f"PRAGMA key = \"x'{key.hex()}'\"")
        # Pinned so that a newer SQLCipher keeps reading today's files.
        conn.execute("PRAGMA cipher_compatibility = 4")
        # A second connection (a backup reader, the page check) waits instead of
        # failing at once, from its first read on.
        conn.execute("PRAGMA busy_timeout = 5000")
        try:
            # Verifies the key: reading the schema decrypts page 1.
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except DatabaseError as exc:
            damaged = _damaged_pages(conn, path)
            if damaged:
                raise corrupt(path, f"{damaged} fails its authentication") from exc
            raise StateError(
                f"the database key does not open {path}: set CONE_DB_KEY or --key-file "
                "to the key this state directory was created with",
                reason="wrong_key",
            ) from exc
        # Temporary tables and indices stay in memory, never as plaintext on disk.
        conn.execute("PRAGMA temp_store = MEMORY")
    except BaseException:
        conn.close()
        raise
    return conn


def open_database(path: Path, key: bytes) -> sqlcipher.Connection:
    """Open (or create, mode 0600) the store at `path` with `key`, pragmas applied.

    Raises StateError(reason="wrong_key") without writing anything when the key does
    not open an existing file. Pages beyond the schema are not read here: damage
    further in is found by the page check (cone/store/_check.py) or by the read that
    meets it (`is_damage`).
    """
    refuse_link(path)
    if not path.exists():
        # Create the file with 0600 before SQLite does, so it is never world-readable
        # (O_EXCL: a link planted meanwhile is refused, not followed).
        os.close(open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    conn = keyed_connection(path, key)
    try:
        # WAL: readers never block the writer; commits append to the log.
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a commit that returned is on disk, even across an OS crash.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        # Deleted and cleared content is overwritten, not left in free space: a peer's
        # deletion or a disappearing setting takes the content off the disk. (SQLCipher
        # turns this on with the key already; it is stated here as the contract.)
        conn.execute("PRAGMA secure_delete = ON")
    except BaseException:
        conn.close()
        raise
    for suffix in ("-wal", "-shm"):
        make_private(Path(str(path) + suffix))
    return conn
