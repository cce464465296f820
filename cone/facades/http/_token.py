"""The bearer token: made on first use, kept 0600 in the state directory."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from cone._fs import make_private, open_nofollow, refuse_link

TOKEN_FILE = "http.token"


def load_or_create(home: Path) -> str:
    """The token in `home/http.token`, created (32 random bytes, URL-safe) if absent."""
    path = home / TOKEN_FILE
    refuse_link(path)
    try:
        fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        make_private(path)
        token = path.read_text().strip()
        if token:
            return token
        fd = open_nofollow(path, os.O_WRONLY | os.O_TRUNC, 0o600)
    token = secrets.token_urlsafe(32)
    try:
        os.write(fd, token.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return token


def matches(given: str, token: str) -> bool:
    """Constant-time comparison of a presented token with the real one."""
    return hmac.compare_digest(given.encode(), token.encode())


__all__ = ["TOKEN_FILE", "load_or_create", "matches"]
