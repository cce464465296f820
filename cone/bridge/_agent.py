"""Running the agent's command for one attempt of a turn.

The command starts in its own session (so its whole process group can be killed),
with the turn as JSON on stdin and `CONE_*` variables in its environment; its stdout
is collected as the reply; its stderr is the bridge's stderr.

A command outlives a `kill -9` of the bridge (nothing runs in the child between fork
and exec: that is unsafe in a process with gRPC's and libxmtp's threads, and crashed
children under load). Its pid is in the journal, and the next start kills that
process group if it is still the same turn's (`kill_leftover`). Until then it runs
on, and dies of SIGPIPE if it writes its reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: Seconds a command gets between SIGTERM and SIGKILL when the bridge shuts down.
STOP_GRACE_S: Final = 5.0


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended."""

    exit_code: int | None  # None when killed for the timeout
    stdout: bytes
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """Exit 0 within the timeout."""
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """A short reason for logs and the parked list."""
        if self.timed_out:
            return "timeout"
        code = self.exit_code
        if code is not None and code < 0:
            return f"killed by signal {-code}"
        return f"exit {code}"


def _memory_file(data: bytes) -> int | None:
    """An anonymous in-memory file holding `data`, read from the start (Linux), or None.

    The turn reaches the command's stdin this way rather than through a pipe: nothing
    to feed while the command runs, and no plaintext on disk."""
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    fd: int = create("cone-turn")  # close-on-exec; dup2 onto stdin clears it
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


async def _reaped(done: asyncio.Future[bytes]) -> None:
    """Wait for the killed group's stdout to close, a bounded time: a process that left
    the group (its own setsid) may hold it open; its waiting thread is then left to it."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(done), STOP_GRACE_S)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def run_agent(
    argv: Sequence[str],
    stdin: bytes,
    env: Mapping[str, str],
    timeout: float,
    started: Callable[[int], None] = lambda pid: None,
    executor: Executor | None = None,
) -> Outcome:
    """Run `argv` once; cancellation stops it (SIGTERM, then SIGKILL) and re-raises.

    The command is spawned and waited for on `executor`'s threads with `subprocess`
    (no Python code runs in the child before exec, whatever the event loop)."""
    loop = asyncio.get_running_loop()
    memfd = _memory_file(stdin)
    try:

        def spawn() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                list(argv),
                stdin=memfd if memfd is not None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,
                env=dict(env),
                start_new_session=True,
            )

        proc = await loop.run_in_executor(executor, spawn)
    finally:
        if memfd is not None:
            os.close(memfd)
    started(proc.pid)
    feed = None if memfd is not None else stdin

    def communicate() -> bytes:
        out: bytes = proc.communicate(feed)[0]
        return out

    done = loop.run_in_executor(executor, communicate)
    try:
        async with asyncio.timeout(timeout):
            out = await asyncio.shield(done)
    except TimeoutError:
        _signal_group(proc.pid, signal.SIGKILL)
        await _reaped(done)
        return Outcome(None, b"", timed_out=True)
    except asyncio.CancelledError:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            async with asyncio.timeout(STOP_GRACE_S):
                await asyncio.shield(done)
        except TimeoutError:
            _signal_group(proc.pid, signal.SIGKILL)
            await _reaped(done)
        raise
    return Outcome(proc.returncode, out)


def kill_leftover(pid: int, turn_id: str) -> bool:
    """Kill process group `pid` if it is still a command of turn `turn_id` (Linux: its
    environment says so; elsewhere nothing is killed). True when killed."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    if f"CONE_TURN_ID={turn_id}".encode() not in environ.split(b"\0"):
        return False
    try:
        if os.getpgid(pid) != pid:
            return False
    except ProcessLookupError:
        return False
    _signal_group(pid, signal.SIGKILL)
    return True


__all__ = ["STOP_GRACE_S", "Outcome", "kill_leftover", "run_agent"]
