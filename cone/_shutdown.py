"""SIGTERM and SIGINT for the long-running commands: a clean stop within a bound.

The first signal sets `requested` (the command stops cleanly: closes its sessions,
stops the core, closes the store) and cancels work started with `unless_requested`
(starting the core, which can wait on the network for minutes). If the process is
still alive `STOP_BOUND_S` later (`CONE_STOP_BOUND_S` changes it), it exits at once
with `os._exit`, whatever is in flight; so does a second signal. A hard exit loses
nothing committed: every store write is one SQLite transaction with synchronous=FULL,
so it is the `kill -9` of the durability table (docs/guarantees.md).

The process itself may ask for the same stop (`request_stop`: the host found its
store damaged): it is handled as a first signal, bound and second signal included.

Signals are watched by a thread, not by the event loop: a loop thread held up (a
native libxmtp call, a stuck shutdown step) would never run a loop signal handler,
and a second signal would do nothing. CPython's C-level handler writes each signal's
number to the wakeup fd from whichever thread takes the signal; the watcher reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable
from types import FrameType, TracebackType
from typing import Any, Final, TypeVar

from cone.config import seconds_from_environment

T = TypeVar("T")

#: Seconds from the first SIGTERM or SIGINT to the process's exit, at most.
STOP_BOUND_S: Final = 10.0
#: The environment variable that changes it (tests shorten it: cone/config.py).
STOP_BOUND_ENV: Final = "CONE_STOP_BOUND_S"
SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
# What the watcher reads for a stop the process asked for (no signal's number).
_REQUESTED: Final = 0

# The Shutdown of this process's running command, while it runs.
_active: Shutdown | None = None


def request_stop(why: str, exit_code: int) -> bool:
    """Stop this process's long-running command cleanly, as a first signal would (the
    same bound; a forced exit then exits `exit_code`). False when no command here
    watches for a stop (a one-shot command ends by itself)."""
    shutdown = _active
    if shutdown is None:
        return False
    shutdown.request(why, exit_code)
    return True


def _stderr_fd() -> int:
    """The process's real stderr (cone._logs may have put a pipe on fd 2)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


def _ignore(signum: int, frame: FrameType | None) -> None:
    # A Python handler (not SIG_IGN) so that the C handler writes the wakeup fd.
    return None


class Shutdown:
    """`async with Shutdown("daemon") as shutdown:` around a command's whole run."""

    def __init__(self, command: str, bound_s: float | None = None) -> None:
        """`bound_s`: the stop bound (None: `CONE_STOP_BOUND_S`, else `STOP_BOUND_S`)."""
        self.command = command
        if bound_s is None:
            bound_s = seconds_from_environment(STOP_BOUND_ENV, STOP_BOUND_S)
        self.bound_s = bound_s
        self.requested = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._interruptible: set[asyncio.Future[Any]] = set()
        self._read, self._write = socket.socketpair()
        self._code = 0  # a forced exit's code: 128 + the signal's number
        self._why = ""

    async def __aenter__(self) -> Shutdown:
        global _active
        _active = self
        self._write.setblocking(False)
        for sig in SIGNALS:
            signal.signal(sig, _ignore)
        # After the loop started: uvloop points the wakeup fd at its own pipe when it runs.
        signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="cone-signals", daemon=True).start()
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        # The work is done: a signal from here on ends the process at once (the
        # watcher's deadline, if armed, still holds for what remains of the exit).
        global _active
        _active = None
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_DFL)

    def request(self, why: str, exit_code: int) -> None:
        """Stop as a first signal would, saying `why`; a forced exit exits `exit_code`."""
        self._why, self._code = why, exit_code
        with contextlib.suppress(OSError):
            self._write.send(bytes([_REQUESTED]))

    async def unless_requested(self, work: Awaitable[T]) -> T | None:
        """`await work`, or None (work cancelled) once a stop is requested."""
        if self.requested.is_set():
            if asyncio.iscoroutine(work):
                work.close()
            return None
        task = asyncio.ensure_future(work)
        self._interruptible.add(task)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not self.requested.is_set():
                task.cancel()
                raise
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return None
        finally:
            self._interruptible.discard(task)

    def _stop(self) -> None:
        if hold := os.environ.get("CONE_TEST_HOLD_LOOP_S"):
            # Test hook (docs/development.md): hold the loop thread, as a stuck native
            # call would, to prove the bound and the second signal.
            time.sleep(float(hold))
        self.requested.set()
        for task in list(self._interruptible):
            task.cancel()

    def _watch(self) -> None:
        deadline: float | None = None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self._read], [], [], wait)
            if not readable:
                self._exit(f"did not stop within {self.bound_s:.0f} s; exiting now")
            for signum in self._read.recv(64):
                if signum == _REQUESTED:
                    if deadline is not None:
                        continue  # stopping already
                    what = self._why
                else:
                    if signum not in SIGNALS:
                        continue
                    if deadline is not None:
                        again = "again" if self._code == 128 + signum else "while stopping"
                        self._exit(f"{signal.Signals(signum).name} {again}; exiting now")
                    self._code = 128 + signum
                    what = signal.Signals(signum).name
                deadline = time.monotonic() + self.bound_s
                # A stop asked for is normal: INFO, not a warning (only a forced exit is).
                self._say(
                    f"{what}; stopping (at most {self.bound_s:.0f} s, "
                    "a second signal ends it at once)",
                    logging.INFO,
                )
                with contextlib.suppress(RuntimeError):  # the loop has closed already
                    self._loop.call_soon_threadsafe(self._stop)

    def _say(self, what: str, level: int = logging.WARNING) -> None:
        # In the log's format, but written straight to the real stderr: the loop (and
        # a handler's lock) may be held, and fd 2 may be the pipe of cone._logs, whose
        # reader would not get to it before an os._exit.
        line = f"cone {self.command}: {what}"
        record = logging.LogRecord("cone.shutdown", level, "", 0, line, None, None)
        handlers = logging.getLogger().handlers
        with contextlib.suppress(Exception):
            line = handlers[0].format(record) if handlers else line
        with contextlib.suppress(OSError, ValueError):
            os.write(_stderr_fd(), (line + "\n").encode())

    def _exit(self, why: str) -> None:
        self._say(why)
        os._exit(self._code)


__all__ = ["SIGNALS", "STOP_BOUND_ENV", "STOP_BOUND_S", "Shutdown", "request_stop"]
