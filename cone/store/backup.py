"""The backup file: one SQLCipher database keyed by a passphrase.

Construction (why: a well-known, authenticated format we already ship): SQLCipher 4
defaults with the passphrase as key: PBKDF2-HMAC-SHA512 with 256,000 iterations and a
random per-file salt derive the key; every page is AES-256-CBC encrypted and
authenticated with HMAC-SHA512, so a wrong passphrase, a flipped byte or a truncated
file is detected before anything is trusted.

Contents:
- cone's own tables, exported with `sqlcipher_export` from the live store (one
  consistent snapshot, taken on the store's single thread);
- `backup_manifest`: format version, inbox id, installation id, creation time, the
  store's schema version, and a SHA-256 per table and per file;
- `backup_files`: libxmtp's database files (already encrypted by libxmtp with its own
  key, which travels inside cone's tables), chunked, each with its SHA-256.

Restore checks the passphrase, the format version and every checksum first, builds
the new state directory beside the target, and moves it into place only at the end:
a failed restore writes nothing to the target.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlcipher3 import dbapi2 as sqlcipher

from cone._fs import private_dir
from cone.errors import InvalidArgument, StateError, TargetError, storage_full
from cone.store import meta
from cone.store._db import Connection, open_database
from cone.store._migrations import MIGRATIONS
from cone.store.xmtp_database import open_xmtp_database, rotate_group_keys_at_next_use

FORMAT_VERSION = 1
_CHUNK = 4 * 1024 * 1024
_BACKUP_TABLES = ("backup_manifest", "backup_files")
#: The only files a backup may hold: libxmtp's database and its salt, by plain name.
RESTORABLE_FILES = frozenset({"xmtp.db3", "xmtp.db3.sqlcipher_salt"})
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Manifest:
    """What a backup says about itself."""

    format_version: int
    inbox_id: str
    installation_id: str
    created_ns: int
    schema_version: int
    table_sha256: dict[str, str]
    file_sha256: dict[str, str]
    messages: int


def _open_keyed(path: Path, passphrase: str) -> Connection:
    conn = sqlcipher.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA cipher_log_level = NONE")
    conn.execute("PRAGMA key = " + _quote(passphrase))
    return conn


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _cone_tables(conn: Connection, schema: str = "main") -> list[str]:
    rows = conn.execute(
        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table'"
        " AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    return [r[0] for r in rows if r[0] not in _BACKUP_TABLES]


def table_digests(conn: Connection, schema: str = "main") -> dict[str, str]:
    """A SHA-256 per cone table over its rows in a fixed order."""
    out = {}
    for table in _cone_tables(conn, schema):
        h = hashlib.sha256()
        cur = conn.execute(f'SELECT * FROM {schema}."{table}" ORDER BY 1, 2')
        for row in cur:
            h.update(repr(row).encode())
        out[table] = h.hexdigest()
    return out


def write_backup(
    store_conn: Connection,
    target: Path,
    passphrase: str,
    *,
    identity: tuple[str, str],
    files: dict[str, Path],
    created_ns: int,
) -> Manifest:
    """Write a complete backup at `target` (the caller keeps libxmtp's files still)."""
    if not passphrase:
        raise InvalidArgument("the backup passphrase is empty", field="passphrase")
    target.unlink(missing_ok=True)
    store_conn.execute("ATTACH DATABASE ? AS backup KEY ?", (str(target), passphrase))
    try:
        store_conn.execute("BEGIN")
        try:
            store_conn.execute("SELECT sqlcipher_export('backup')")
            digests = table_digests(store_conn)
            # Every message it carries: those taken in, and this identity's own sent ones.
            (messages,) = store_conn.execute(
                "SELECT (SELECT count(*) FROM messages)"
                " + (SELECT count(*) FROM outbox WHERE message_id IS NOT NULL)"
            ).fetchone()
            (schema_version,) = store_conn.execute("PRAGMA user_version").fetchone()
        finally:
            store_conn.execute("COMMIT")
    finally:
        store_conn.execute("DETACH DATABASE backup")
    os.chmod(target, 0o600)
    conn = _open_keyed(target, passphrase)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("CREATE TABLE backup_manifest (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(
            "CREATE TABLE backup_files (name TEXT NOT NULL, seq INTEGER NOT NULL,"
            " data BLOB NOT NULL, PRIMARY KEY (name, seq))"
        )
        file_digests = {}
        for name, path in files.items():
            h = hashlib.sha256()
            with path.open("rb") as f:
                seq = 0
                while chunk := f.read(_CHUNK):
                    h.update(chunk)
                    conn.execute("INSERT INTO backup_files VALUES (?, ?, ?)", (name, seq, chunk))
                    seq += 1
            file_digests[name] = h.hexdigest()
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            inbox_id=identity[0],
            installation_id=identity[1],
            created_ns=created_ns,
            schema_version=int(schema_version),
            table_sha256=digests,
            file_sha256=file_digests,
            messages=int(messages),
        )
        conn.execute(
            "INSERT INTO backup_manifest VALUES ('manifest', ?)", (json.dumps(manifest.__dict__),)
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return manifest


def _bad(path: Path, what: str) -> StateError:
    return StateError(f"{path} is not a valid cone backup: {what}", reason="bad_backup")


def _check_length(conn: Connection, path: Path) -> None:
    """Every byte is authenticated only if the file ends where its pages end: bytes
    appended after the last page would otherwise be ignored, unauthenticated."""
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    (page_count,) = conn.execute("PRAGMA page_count").fetchone()
    size = path.stat().st_size
    if size != int(page_size) * int(page_count):
        raise _bad(
            path,
            f"{size} bytes where its {page_count} authenticated pages end at "
            f"{int(page_size) * int(page_count)} (appended or missing bytes)",
        )


def _digests(value: object) -> dict[str, str] | None:
    if not isinstance(value, dict):
        return None
    for name, digest in value.items():
        if not (isinstance(name, str) and isinstance(digest, str) and len(digest) == 64):
            return None
        if any(c not in "0123456789abcdef" for c in digest):
            return None
    return value


def _parse_manifest(path: Path, text: object) -> Manifest:
    """The manifest, every field of the right type; bad_backup otherwise."""
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise _bad(path, "its manifest is not a JSON object")
    version = data.get("format_version")
    if type(version) is int and version > FORMAT_VERSION:
        raise StateError(
            f"{path} is backup format {version}, newer than this cone reads "
            f"({FORMAT_VERSION}): upgrade cone",
            reason="bad_backup",
        )
    fields = {f.name for f in dataclasses.fields(Manifest)}
    if set(data) != fields:
        raise _bad(path, f"its manifest has the fields {sorted(data)}, not {sorted(fields)}")
    for name in ("format_version", "created_ns", "schema_version", "messages"):
        # bool is an int subclass in Python; JSON true is not a number.
        if type(data[name]) is not int or data[name] < 0:
            raise _bad(path, f"manifest field {name} is not a non-negative integer")
    for name in ("inbox_id", "installation_id"):
        if not isinstance(data[name], str):
            raise _bad(path, f"manifest field {name} is not a string")
    for name in ("table_sha256", "file_sha256"):
        if _digests(data[name]) is None:
            raise _bad(path, f"manifest field {name} is not a map of names to SHA-256 digests")
    unknown = set(data["file_sha256"]) - RESTORABLE_FILES
    if unknown:
        raise _bad(path, f"it names files cone does not restore: {sorted(unknown)}")
    return Manifest(**data)


def read_manifest(path: Path, passphrase: str) -> Manifest:
    """The manifest, after checking that the passphrase opens the file and that the
    file ends where its authenticated pages end."""
    if not path.is_file():
        raise InvalidArgument(f"{path} is not a file", field="file")
    conn = _open_keyed(path, passphrase)
    try:
        try:
            row = conn.execute(
                "SELECT value FROM backup_manifest WHERE key = 'manifest'"
            ).fetchone()
            _check_length(conn, path)
        except sqlcipher.DatabaseError as exc:
            raise StateError(
                f"{path} cannot be opened: wrong passphrase, or the file is damaged or not a "
                "cone backup",
                reason="bad_backup",
            ) from exc
    finally:
        conn.close()
    if row is None:
        raise StateError(f"{path} has no manifest: not a cone backup", reason="bad_backup")
    return _parse_manifest(path, row[0])


def restore_backup(
    path: Path,
    passphrase: str,
    target: Path,
    new_key: bytes,
    progress: Progress | None = None,
    extra_files: dict[str, bytes] | None = None,
) -> Manifest:
    """Check everything, then recreate the state directory at `target` (must be empty).

    `new_key` keys the restored store; `extra_files` (such as a new `db.key`) are
    written beside it. Raises before touching `target` on any failure.
    """
    if target.exists() and any(target.iterdir()):
        raise StateError(
            f"{target} is not empty: restore only into an empty state directory",
            reason="state_error",
        )
    manifest = read_manifest(path, passphrase)
    if manifest.schema_version > len(MIGRATIONS):
        raise StateError(
            f"the backup's store schema ({manifest.schema_version}) is newer than this cone "
            "knows: upgrade cone",
            reason="bad_backup",
        )
    private_dir(target.parent)
    staging = Path(tempfile.mkdtemp(prefix=".cone-restore-", dir=target.parent))
    try:
        try:
            _restore_into(path, passphrase, manifest, staging, new_key, progress)
        except sqlcipher.DatabaseError as exc:
            if storage_full(str(exc)):
                raise TargetError(
                    f"the disk holding {target} is full: free space there and restore again",
                    reason="disk_full",
                ) from exc
            raise StateError(f"{path} is damaged: {exc}", reason="bad_backup") from exc
        for name, data in (extra_files or {}).items():
            fd = os.open(staging / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        if target.exists():
            target.rmdir()
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _restore_into(
    path: Path,
    passphrase: str,
    manifest: Manifest,
    staging: Path,
    new_key: bytes,
    progress: Progress | None,
) -> None:
    os.chmod(staging, 0o700)
    src = _open_keyed(path, passphrase)
    try:
        digests = table_digests(src)
        (chunks,) = src.execute("SELECT count(*) FROM backup_files").fetchone()
        total = int(chunks) + 1
        if digests != manifest.table_sha256:
            raise StateError(f"{path} fails its table checksums", reason="bad_backup")
        done = 0
        names = [r[0] for r in src.execute("SELECT DISTINCT name FROM backup_files")]
        if sorted(names) != sorted(manifest.file_sha256):
            raise StateError(
                f"{path} does not hold the files its manifest lists", reason="bad_backup"
            )
        for name in names:
            # Only the files cone knows, by their plain names: never a path elsewhere.
            if name not in RESTORABLE_FILES:
                raise _bad(path, f"it holds a file cone does not restore: {name!r}")
            h = hashlib.sha256()
            fd = os.open(staging / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                for (chunk,) in src.execute(
                    "SELECT data FROM backup_files WHERE name = ? ORDER BY seq", (name,)
                ):
                    if not isinstance(chunk, bytes):
                        raise _bad(path, f"a chunk of {name} is not bytes")
                    h.update(chunk)
                    out.write(chunk)
                    done += 1
                    if progress:
                        progress(done, total)
                out.flush()
                os.fsync(out.fileno())
            if h.hexdigest() != manifest.file_sha256[name]:
                raise StateError(f"{path} fails the checksum of {name}", reason="bad_backup")
        store_path = staging / "cone.db"
        open_database(store_path, new_key).close()
        src.execute("ATTACH DATABASE ? AS restored KEY ?", (str(store_path), f"x'{new_key.hex()}'"))
        try:
            src.execute("BEGIN")
            src.execute("SELECT sqlcipher_export('restored')")
            src.execute("COMMIT")
            for table in _BACKUP_TABLES:
                src.execute(f"DROP TABLE restored.{table}")
            src.execute(f"PRAGMA restored.user_version = {manifest.schema_version}")
            if table_digests(src, "restored") != manifest.table_sha256:
                raise StateError(
                    "the restored store does not match the backup", reason="bad_backup"
                )
        finally:
            src.execute("DETACH DATABASE restored")
        if progress:
            progress(total, total)
    finally:
        src.close()
    restored = open_database(store_path, new_key)
    try:
        restored.execute("VACUUM")
        _mark_restored(restored, staging, manifest)
    finally:
        restored.close()


#: The store's meta key that says this state directory was restored, and from what.
RESTORED_KEY = "restored_from"
#: The store's meta key, a conversation id after it, of a conversation a restored copy
#: has not yet made safe to send in (cone/core/restore_fence.py).
RESTORE_DUE = "restore_due:"


def _mark_restored(store: Connection, staging: Path, manifest: Manifest) -> None:
    """Make the restored copy safe to send from (docs/backup.md, "What a restore
    guarantees"): libxmtp rotates every group's keys before it next uses them, and the
    store records the restore and each conversation the core must check before its
    first send there."""
    key = meta.get(store, "xmtp_db_key")
    xmtp_db = staging / "xmtp.db3"
    if key is None or not xmtp_db.exists():
        raise StateError("the backup holds no libxmtp database and key", reason="bad_backup")
    xmtp = open_xmtp_database(xmtp_db, key)
    try:
        groups = rotate_group_keys_at_next_use(xmtp)
    finally:
        xmtp.close()
    mark = {"installation_id": manifest.installation_id, "backup_created_ns": manifest.created_ns}
    store.execute("BEGIN IMMEDIATE")
    try:
        meta.put(store, RESTORED_KEY, json.dumps(mark).encode())
        for group_id in groups:
            meta.put(store, RESTORE_DUE + group_id, b"")
        store.execute("COMMIT")
    except BaseException:
        store.execute("ROLLBACK")
        raise
