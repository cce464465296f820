"""The state-directory lock: exactly one process owns an identity."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from cone._fs import open_nofollow
from cone.errors import StateError


class StateLock:
    """An exclusive flock on `cone.lock`, held for the life of the owning process.

    The kernel drops the lock when the process dies, `kill -9` included, so a
    stale lock file never blocks a restart.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise StateError(reason="locked") naming the holder."""
        # Never through a link: the pid below would overwrite the link's target.
        fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise StateError(f"{self.path} is not a regular file", reason="bad_permissions")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StateError(
                f"another cone process (pid {holder}) holds {self.path.parent}: "
                "stop it, or use its socket (cone serve and cone mcp relay to it)",
                reason="locked",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def held_by_other(self) -> bool:
        """Whether another process holds the lock now (without taking it)."""
        try:
            fd = open_nofollow(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def release(self) -> None:
        """Drop the lock."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
