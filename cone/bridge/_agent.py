"""Running the agent's command for one attempt of a turn.

The command starts in its own session (so its whole process group can be killed),
with the turn as JSON on stdin and `CONE_*` variables in its environment; its stdout
is collected as the reply; its stderr is the bridge's stderr.

No Python code runs in the child between fork and exec (a `preexec_fn` in a process
with gRPC's and libxmtp's threads crashed children under load), so the command is not
told to die with the bridge: it outlives a `kill -9` of the bridge. Its pid is in the
journal, and the next start kills that process group if it is still the same turn's
(`kill_leftover`). Until then it runs on, and dies of SIGPIPE if it writes its reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

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


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class _Child(Protocol):
    """A started command: `finished` resolves to (exit code, stdout) at exit and EOF."""

    pid: int
    finished: asyncio.Future[tuple[int, bytes]]

    async def reap(self) -> None:
        """After a kill: wait (bounded) until it is gone, and release its resources."""


class _DirectChild:
    """Spawned with posix_spawn from the event loop's thread and watched through a
    pidfd and a non-blocking pipe: no thread hand-offs on the way in or out (Linux)."""

    def __init__(self, argv: Sequence[str], stdin_fd: int, env: Mapping[str, str]) -> None:
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        try:
            self.pid = os.posix_spawnp(
                argv[0],
                list(argv),
                dict(env),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, stdin_fd, 0),
                    (os.POSIX_SPAWN_DUP2, write_fd, 1),
                ],
                setsid=True,
                setsigmask=(),
                setsigdef=_DEFAULT_SIGNALS,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self.loop = loop
        self.read_fd = read_fd
        self.pidfd = os.pidfd_open(self.pid)
        self.chunks: list[bytes] = []
        self.code: int | None = None
        self.eof = False
        self.finished = loop.create_future()
        self.gone: asyncio.Future[None] = loop.create_future()
        os.set_blocking(read_fd, False)
        loop.add_reader(read_fd, self._readable)
        loop.add_reader(self.pidfd, self._exited)

    def _readable(self) -> None:
        while True:
            try:
                data = os.read(self.read_fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.loop.remove_reader(self.read_fd)
                self.eof = True
                self._settle()
                return
            self.chunks.append(data)

    def _exited(self) -> None:
        self.loop.remove_reader(self.pidfd)
        _, status = os.waitpid(self.pid, 0)
        self.code = os.waitstatus_to_exitcode(status)
        self.gone.set_result(None)
        self._settle()

    def _settle(self) -> None:
        if self.code is not None and self.eof:
            self._close()
            if not self.finished.done():
                self.finished.set_result((self.code, b"".join(self.chunks)))

    def _close(self) -> None:
        for fd in (self.read_fd, self.pidfd):
            if fd >= 0:
                self.loop.remove_reader(fd)
                os.close(fd)
        self.read_fd = self.pidfd = -1

    async def reap(self) -> None:
        with contextlib.suppress(TimeoutError):  # the pidfd reader reaps it
            async with asyncio.timeout(STOP_GRACE_S):
                await asyncio.shield(self.gone)
        self._close()


class _ThreadChild:
    """Spawned and waited for with `subprocess` on executor threads (no pidfd)."""

    def __init__(self, proc: subprocess.Popen[bytes], feed: bytes | None, pool: Executor | None):
        self.proc = proc
        self.pid = proc.pid
        loop = asyncio.get_running_loop()

        def communicate() -> tuple[int, bytes]:
            out: bytes = proc.communicate(feed)[0]
            return proc.returncode, out

        self.finished = asyncio.ensure_future(loop.run_in_executor(pool, communicate))

    async def reap(self) -> None:
        # A process that left the group (its own setsid) may hold stdout open; its
        # waiting thread is then left to it.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_GRACE_S):
                await asyncio.shield(self.finished)


_DIRECT = all(hasattr(os, name) for name in ("posix_spawnp", "pidfd_open", "memfd_create"))
_DEFAULT_SIGNALS = tuple(
    sig for sig in (getattr(signal, "SIGPIPE", None), getattr(signal, "SIGXFSZ", None)) if sig
)


async def _start(
    argv: Sequence[str], stdin: bytes, env: Mapping[str, str], pool: Executor | None
) -> _Child:
    memfd = _memory_file(stdin)
    try:
        if _DIRECT and memfd is not None and memfd > 2:
            try:
                return _DirectChild(argv, memfd, env)
            except OSError as err:
                if err.errno != errno.ENOSYS:
                    raise  # not found, not executable: the attempt fails
        loop = asyncio.get_running_loop()

        def spawn() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                list(argv),
                stdin=memfd if memfd is not None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,
                env=dict(env),
                start_new_session=True,
            )

        proc = await loop.run_in_executor(pool, spawn)
        return _ThreadChild(proc, None if memfd is not None else stdin, pool)
    finally:
        if memfd is not None:
            os.close(memfd)


async def run_agent(
    argv: Sequence[str],
    stdin: bytes,
    env: Mapping[str, str],
    timeout: float,
    started: Callable[[int], None] = lambda pid: None,
    executor: Executor | None = None,
) -> Outcome:
    """Run `argv` once; cancellation stops it (SIGTERM, then SIGKILL) and re-raises.

    On Linux the command is spawned with posix_spawn (no Python code runs in the child
    before exec: forking a process with gRPC's and libxmtp's threads and running code
    in the child crashed children under load) and watched from the event loop;
    elsewhere `subprocess` on `executor`'s threads does the same."""
    child = await _start(argv, stdin, env, executor)
    started(child.pid)
    try:
        async with asyncio.timeout(timeout):
            code, out = await asyncio.shield(child.finished)
    except TimeoutError:
        _signal_group(child.pid, signal.SIGKILL)
        await child.reap()
        return Outcome(None, b"", timed_out=True)
    except asyncio.CancelledError:
        _signal_group(child.pid, signal.SIGTERM)
        try:
            async with asyncio.timeout(STOP_GRACE_S):
                await asyncio.shield(child.finished)
        except TimeoutError:
            _signal_group(child.pid, signal.SIGKILL)
            await child.reap()
        raise
    return Outcome(code, out)


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
