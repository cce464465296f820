"""The bearer token: made on first use, kept 0600 in the state directory; and the
running front's URL (`http.url`), from which `cone web` makes the console's login URL."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from cone._fs import make_private, open_nofollow, refuse_link
from cone.errors import ConeError, StateError, os_failure

TOKEN_FILE = "http.token"
URL_FILE = "http.url"


def load_or_create(home: Path) -> str:
    """The token in `home/http.token`, created (32 random bytes, URL-safe) if absent.
    A token that cannot be written (a full disk: `storage_full`) leaves no file."""
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
    except OSError as exc:
        raise _unwritten(exc, path) from None
    token = secrets.token_urlsafe(32)
    _write_all(fd, path, token.encode() + b"\n")
    return token


def _write_all(fd: int, path: Path, data: bytes) -> None:
    """Write `data` to the new file `fd` at `path`, synced, and close it; on failure
    the file is removed and the failure is one ConeError."""
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise _unwritten(exc, path) from None


def _unwritten(exc: OSError, path: Path) -> ConeError:
    """A file of the state directory that cannot be written: its full disk is the
    state directory's (`storage_full`, as the store says it)."""
    failure = os_failure(exc, str(path))
    if failure.reason == "disk_full":
        return StateError(
            f"{path} cannot be written: the state directory's disk is full "
            f"({exc.strerror}): free space there",
            reason="storage_full",
        )
    return failure


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
    try:
        fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise _unwritten(exc, tmp) from None
    _write_all(fd, tmp, url.encode() + b"\n")
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
