"""Where the database key comes from.

Sources, first match wins: `CONE_DB_KEY` (64 hex characters), then the key file given
with `--key-file`, then `db.key` in the state directory. A missing key file is created
(`0600`, 32 random bytes as hex) only when there is no store yet: creating a fresh key
for an existing store would only make it unreadable, so that is refused instead.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cone._fs import private_dir
from cone.config import secret
from cone.errors import StateError

KEY_ENV = "CONE_DB_KEY"


def parse_hex_key(text: str, what: str, reason: str = "wrong_key") -> bytes:
    """A 32-byte key written as 64 hex characters (an optional 0x is allowed)."""
    text = text.strip().removeprefix("0x")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise StateError(f"{what} is not 64 hex characters", reason=reason)
    return key


def load_db_key(*, key_file: Path | None, default_key_file: Path, store_exists: bool) -> bytes:
    """The 32-byte key for cone's store (and, through it, libxmtp's database)."""
    env = secret(KEY_ENV)
    if env:
        return parse_hex_key(env, f"the database key from {KEY_ENV}")
    path = key_file or default_key_file
    if path.exists():
        return parse_hex_key(path.read_text(), f"the database key in {path}")
    if store_exists:
        raise StateError(
            f"the store exists but its key file {path} is missing: set {KEY_ENV} or "
            "--key-file to the key the store was created with",
            reason="wrong_key",
        )
    private_dir(path.parent)
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex() + "\n")
        f.flush()
        os.fsync(f.fileno())
    return key
