"""A daemon's wall clock as a test's input: the real clock plus an offset the test sets.

libxmtp 1.10 stamps its inserts with the clock plus the seconds within the minute, so
its stamps jump back at every minute boundary (docs/ingest.md). A test that forces that
timing moves the daemon's clock to the second it needs instead of waiting for the wall
clock to get there:

    clock = DaemonClock.at_second(tmp_path, 46)      # skips without a C compiler
    async with clock.daemon(home, url) as daemon:     # a DaemonProcess on this clock
        await clock.reach(daemon, 48, 53)             # forward, then seen by the daemon

The daemon (and its children) preload `realtime_shift.c`, built here with the system's
C compiler on first use: the realtime clock that Python, libxmtp's Rust and SQLite read
is shifted by the offset in a file this process writes; the monotonic clock, which
timers, sleeps and timeouts use, stays real. The clock only ever moves forward, as a
real one does, and stays within `MAX_SKEW_S` of the real clock (the devnet and the
peers keep real time): a move it cannot make at once is made up by waiting.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import pytest

from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.waiting import until

#: The most the daemon's clock is ahead of or behind the real one.
MAX_SKEW_S: Final = 30.0
_SOURCE: Final = Path(__file__).with_name("realtime_shift.c")


@functools.cache
def realtime_shift() -> Path | None:
    """The shim built from `realtime_shift.c` (once per test process, in a directory
    of its own: a library a daemon preloads is not taken from a shared place), or None
    without a C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    directory = Path(tempfile.mkdtemp(prefix="cone-clock-"))
    atexit.register(shutil.rmtree, directory, True)
    built = directory / "realtime_shift.so"
    command = [compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(_SOURCE), "-ldl"]
    subprocess.run(command, check=True, capture_output=True)
    return built


class DaemonClock:
    """The clock of the daemons started with `env()`: real time plus `offset_s`."""

    def __init__(self, library: Path, directory: Path, offset_s: float) -> None:
        self._library = library
        self._file = directory / "clock-offset"
        self.offset_s = 0.0
        self._set(offset_s)

    @classmethod
    def at_second(cls, directory: Path, second: float) -> DaemonClock:
        """A clock that reads `second` within the minute now (its file in `directory`);
        the test is skipped where no C compiler builds the clock's shim."""
        library = realtime_shift()
        if library is None:
            pytest.skip("no C compiler (cc) to build the daemon clock's shim")
        # The one offset within ±30 s that puts the clock at `second` now.
        offset = (second - time.time()) % 60
        return cls(library, directory, offset - 60 if offset >= MAX_SKEW_S else offset)

    def env(self) -> dict[str, str]:
        """The environment that gives a daemon (and its children) this clock."""
        return {"LD_PRELOAD": str(self._library), "CONE_TEST_CLOCK_FILE": str(self._file)}

    @contextlib.asynccontextmanager
    async def daemon(self, home: Path, api_url: str) -> AsyncIterator[DaemonProcess]:
        """A started daemon on this clock, stopped after."""
        async with DaemonProcess(home, api_url, extra_env=self.env()) as daemon:
            yield daemon

    def now(self) -> float:
        """What the daemon's clock reads now, in seconds (once it has read the file)."""
        return time.time() + self.offset_s

    def second(self) -> float:
        """The daemon's second within the minute now."""
        return self.now() % 60

    def _set(self, offset_s: float) -> None:
        assert offset_s >= self.offset_s or not self._file.exists(), "a clock never runs back"
        assert abs(offset_s) <= MAX_SKEW_S, offset_s
        self.offset_s = offset_s
        # Seconds ahead of (or behind) the real clock, as realtime_shift.c reads them.
        self._file.write_text(f"{offset_s:+.3f}\n")

    async def forward_to(self, second: float) -> None:
        """Move the clock forward to `second` within the minute: at once as far as
        `MAX_SKEW_S` allows, the rest by waiting for real time to pass."""
        ahead = (second - self.second()) % 60
        step = min(ahead, MAX_SKEW_S - self.offset_s)
        self._set(self.offset_s + step)
        rest = ahead - step
        if rest > 0:  # real time makes up what the skew bound does not allow
            await asyncio.sleep(rest)  # the input itself: real time passing

    async def reach(self, daemon: DaemonProcess, lo: float, hi: float, after: float = 0.0) -> float:
        """Move the running daemon's clock forward into [lo, hi) of the minute (unless
        it is there) and wait until the daemon itself reports it: a sync it ended at a
        time in that window, after the move (and after `after`). Returns that time.
        A machine too busy to sync within the window meets the next minute's."""
        if not lo <= self.second() < hi - 1:
            await self.forward_to(lo + 0.5)
        moved = max(self.now() - 0.5, after + 1e-6)

        async def synced_in_window() -> float | None:
            # A sync asked for now, not the catch-up's next one: a busy machine that
            # stretches the catch-up's period would make it miss the window.
            await daemon.client.call("Sync", pb.SyncRequest())
            at = (await daemon.status()).last_sync_at
            seconds = at.seconds + at.nanos / 1e9
            return seconds if seconds >= moved and lo <= seconds % 60 < hi else None

        # The daemon reads the file again within 0.2 s (realtime_shift.c).
        synced = await until(synced_in_window, timeout=90)
        assert synced is not None
        return synced


__all__ = ["MAX_SKEW_S", "DaemonClock", "realtime_shift"]
