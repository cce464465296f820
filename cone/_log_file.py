"""`--log-file`: checked before a command does anything, and written so that a full
disk costs log lines, never the process or a traceback.

A file that cannot be opened for appending, or whose disk has no free block left,
stops the command before it starts (`check`: one line, TargetError, exit 8), and a
file it had to create for the check is removed. Once running, a write that fails
(the disk filled up later) is said once on stderr, in one line, and said again when
the file takes lines again; what was logged meanwhile is lost.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from cone.errors import ConeError, TargetError, os_failure


def check(path: str) -> ConeError | None:
    """Why the log file at `path` cannot take lines now, or None when it can."""
    target = Path(path)
    existed = target.exists()
    try:
        with target.open("a", encoding="utf-8"):
            pass
        free = os.statvfs(target).f_bavail
    except OSError as exc:
        return os_failure(exc, f"the log file {path}")
    if free == 0:
        if not existed:
            target.unlink(missing_ok=True)
        return TargetError(
            f"the disk holding the log file {path} is full: free space there or give "
            "another --log-file",
            reason="disk_full",
        )
    return None


class LogFile(logging.FileHandler):
    """A FileHandler whose write failures are one line on stderr per outage."""

    def __init__(self, path: str) -> None:
        super().__init__(path, encoding="utf-8")
        self._failed = False
        self._down = False

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)  # a failure comes back through handleError
        if self._down and not self._failed:
            self._down = False
            print(f"cone: the log file {self.baseFilename} is written again", file=sys.stderr)

    def handleError(self, record: logging.LogRecord) -> None:
        failure = sys.exc_info()[1]
        if not isinstance(failure, OSError):
            super().handleError(record)
            return
        self._failed = True
        if not self._down:
            self._down = True
            said = os_failure(failure, f"the log file {self.baseFilename}").message
            print(f"cone: {said}; log lines are lost until it can be written", file=sys.stderr)


__all__ = ["LogFile", "check"]
