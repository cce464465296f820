"""Opening cone's SQLCipher database: the key, the pragmas, and their order."""

from __future__ import annotations

import os
from pathlib import Path

from sqlcipher3 import dbapi2 as sqlcipher

from cone.errors import StateError

Connection = sqlcipher.Connection
DatabaseError = sqlcipher.DatabaseError


def open_database(path: Path, key: bytes) -> sqlcipher.Connection:
    """Open (or create, mode 0600) the store at `path` with `key`, pragmas applied.

    Raises StateError(reason="wrong_key") without writing anything when the key does
    not open an existing file.
    """
    existed = path.exists()
    if not existed:
        # Create the file with 0600 before SQLite does, so it is never world-readable.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    # isolation_level=None: we issue BEGIN IMMEDIATE ourselves (see Store.write).
    conn = sqlcipher.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        # Silence SQLCipher's own stderr logging; failures surface as exceptions.
        conn.execute("PRAGMA cipher_log_level = NONE")
        # The key comes first: nothing can be read or written before it.
        conn.execute(f"PRAGMA key = \"x'{key.hex()}'\"")
        # Pinned so that a newer SQLCipher keeps reading today's files.
        conn.execute("PRAGMA cipher_compatibility = 4")
        try:
            # Verifies the key: reading the schema decrypts page 1.
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except DatabaseError as exc:
            raise StateError(
                f"the database key does not open {path}: set CONE_DB_KEY or --key-file "
                "to the key this state directory was created with",
                reason="wrong_key",
            ) from exc
        # WAL: readers never block the writer; commits append to the log.
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a commit that returned is on disk, even across an OS crash.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        # A second connection (a backup reader) waits instead of failing at once.
        conn.execute("PRAGMA busy_timeout = 5000")
        # Temporary tables and indices stay in memory, never as plaintext on disk.
        conn.execute("PRAGMA temp_store = MEMORY")
        # Deleted and cleared content is overwritten, not left in free space: a peer's
        # deletion or a disappearing setting takes the content off the disk. (SQLCipher
        # turns this on with the key already; it is stated here as the contract.)
        conn.execute("PRAGMA secure_delete = ON")
    except BaseException:
        conn.close()
        raise
    for suffix in ("-wal", "-shm"):
        side = Path(str(path) + suffix)
        if side.exists():
            side.chmod(0o600)
    return conn
