"""The bearer token: made on first use, kept 0600 in the state directory; and the
running front's URL (`http.url`), from which `cone web` makes the console's login URL."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from cone._fs import make_private, open_nofollow, refuse_link

TOKEN_FILE = "http.token"
URL_FILE = "http.url"


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
    """Constant-time comparison of a presented token with the real one. A header's
    bytes that are not UTF-8 (aiohttp keeps them as surrogates) match nothing."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode())


def login_url(url: str, token: str) -> str:
    """The console's login URL: the token in the fragment, which a browser never sends
    to a server (nor in a Referer); the page moves it to the tab's session storage."""
    return f"{url}#token={token}"


def write_url(home: Path, url: str) -> None:
    """Record the running front's URL for `cone web`."""
    path = home / URL_FILE
    refuse_link(path)
    tmp = home / (URL_FILE + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, url.encode() + b"\n")
    finally:
        os.close(fd)
    tmp.replace(path)


def forget_url(home: Path, url: str) -> None:
    """Remove the recorded URL if it is still this front's."""
    path = home / URL_FILE
    try:
        if path.read_text().strip() == url:
            path.unlink()
    except OSError:
        pass


def read_url(home: Path) -> str | None:
    """The running front's URL, or None when no front recorded one."""
    try:
        return (home / URL_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


__all__ = [
    "TOKEN_FILE",
    "URL_FILE",
    "forget_url",
    "load_or_create",
    "login_url",
    "matches",
    "read_url",
    "write_url",
]
