"""A crafted backup (made with the real code and the passphrase, then tampered with)
writes nothing outside the restore target and fails as bad_backup."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlcipher3 import dbapi2 as sqlcipher

from cone.store import Store, meta
from cone.store.backup import _open_keyed, write_backup
from cone.store.xmtp_database import PLAINTEXT_HEADER_BYTES
from support.daemons import short_home

PASS = "the passphrase the attacker also knows"


def _libxmtp_stand_in(path: Path, key: bytes) -> Path:
    """An empty database in libxmtp's format (SQLCipher, its salt beside it) with the
    one table restore writes to (cone/store/xmtp_database.py); returns the salt file."""
    salt = os.urandom(16)
    conn = sqlcipher.connect(str(path), isolation_level=None)
    conn.execute(f"PRAGMA key = \"x'{key.hex()}'\"")
    conn.execute(f"PRAGMA cipher_plaintext_header_size = {PLAINTEXT_HEADER_BYTES}")
    conn.execute(f"PRAGMA cipher_salt = \"x'{salt.hex()}'\"")
    conn.execute("CREATE TABLE groups (id BLOB PRIMARY KEY, rotated_at_ns BIGINT NOT NULL)")
    conn.execute("INSERT INTO groups VALUES (x'01', 1)")
    conn.close()
    salt_file = Path(f"{path}.sqlcipher_salt")
    salt_file.write_text(salt.hex())
    return salt_file


@pytest.fixture
def backup(tmp_path: Path) -> Path:
    """A genuine backup of a fresh store and a stand-in libxmtp database."""
    store = Store.open(tmp_path / "cone.db", secrets.token_bytes(32))
    xmtp_key = secrets.token_bytes(32)
    store.write_now(meta.put, "xmtp_db_key", xmtp_key)
    xmtp = tmp_path / "xmtp.db3"
    salt = _libxmtp_stand_in(xmtp, xmtp_key)
    target = tmp_path / "genuine.cone"
    try:
        store.read_now(
            write_backup,
            target,
            PASS,
            identity=("ab" * 32, "cd" * 32),
            files={"xmtp.db3": xmtp, "xmtp.db3.sqlcipher_salt": salt},
            created_ns=1,
        )
    finally:
        store.close()
    return target


def _edit_manifest(path: Path, change: Callable[[dict[str, object]], None]) -> None:
    conn = _open_keyed(path, PASS)
    try:
        (text,) = conn.execute("SELECT value FROM backup_manifest").fetchone()
        manifest = json.loads(text)
        change(manifest)
        conn.execute("UPDATE backup_manifest SET value = ?", (json.dumps(manifest),))
    finally:
        conn.close()


def _smuggle(path: Path, name: str, data: bytes) -> None:
    """Add a file under `name`, with a matching checksum in the manifest."""
    conn = _open_keyed(path, PASS)
    try:
        conn.execute("INSERT INTO backup_files VALUES (?, 0, ?)", (name, data))
    finally:
        conn.close()

    def add(manifest: dict[str, object]) -> None:
        files = manifest["file_sha256"]
        assert isinstance(files, dict)
        files[name] = hashlib.sha256(data).hexdigest()

    _edit_manifest(path, add)


def _restore(file: Path) -> tuple[int, str, Path]:
    """`cone restore FILE` into a new home: (exit code, stderr, the home)."""
    home = short_home()
    os.rmdir(home)
    env = {**os.environ, "CONE_BACKUP_PASSPHRASE": PASS}
    env.pop("CONE_DB_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "cone", "restore", str(file), "--home", str(home)],
        env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    return done.returncode, done.stderr.decode(), home


def test_a_genuine_backup_restores(backup: Path) -> None:
    code, err, home = _restore(backup)
    assert code == 0, err
    assert sorted(os.listdir(home)) == ["cone.db", "db.key", "xmtp.db3", "xmtp.db3.sqlcipher_salt"]


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_a_file_named_outside_the_target_is_refused_and_not_written(
    backup: Path, tmp_path: Path, where: str
) -> None:
    escaped = tmp_path / "escaped"
    name = str(escaped) if where == "absolute" else "../escaped"
    _smuggle(backup, name, b"planted")
    code, err, home = _restore(backup)
    assert code == 6, err
    assert "cone does not restore" in err
    assert not os.path.exists(escaped)
    assert not os.path.exists(home.parent / "escaped")
    assert not os.path.exists(home)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("created_ns", "yesterday"),
        ("schema_version", "1; DROP TABLE messages"),
        ("messages", True),
        ("file_sha256", ["xmtp.db3"]),
        ("table_sha256", {"messages": 5}),
        ("inbox_id", None),
        ("format_version", 1.5),
    ],
)
def test_a_manifest_field_of_the_wrong_type_is_bad_backup(
    backup: Path, field: str, value: object
) -> None:
    _edit_manifest(backup, lambda m: m.__setitem__(field, value))
    code, err, home = _restore(backup)
    assert code == 6, err
    assert f"manifest field {field}" in err
    assert not os.path.exists(home)


def test_an_unknown_manifest_field_is_bad_backup(backup: Path) -> None:
    _edit_manifest(backup, lambda m: m.__setitem__("run", "rm -rf /"))
    code, err, _ = _restore(backup)
    assert code == 6, err
    assert "its manifest has the fields" in err


def test_bytes_appended_after_the_authenticated_end_are_refused(backup: Path) -> None:
    with open(backup, "ab") as f:
        f.write(b"unauthenticated tail")
    code, err, home = _restore(backup)
    assert code == 6, err
    assert "appended or missing bytes" in err
    assert not os.path.exists(home)
