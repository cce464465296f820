"""`cone daemon` as a real subprocess on a test state directory.

async with DaemonProcess.start(home, devnet_url) as d:
    ident = await d.client.identity()
    d.kill9(); await d.restart()
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from xmtp_bindings import xmtpv3 as ffi

from cone._shutdown import STOP_BOUND_S
from cone.client import ConeClient
from cone.errors import Unavailable
from conepb.v1 import cone_pb2 as pb
from support.waiting import until

if TYPE_CHECKING:
    from support.peers import Peer

START_TIMEOUT_S = 60.0
#: Seconds a stopping daemon gets before teardown SIGKILLs it: cone's bound
#: (cone._shutdown.STOP_BOUND_S) and a generous margin for a loaded machine.
STOP_WAIT_S = STOP_BOUND_S + 20.0


async def run_cone(args: list[str], env: dict[str, str] | None = None) -> tuple[int, bytes]:
    """Run `cone ARGS` to completion without blocking the loop; (exit code, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", *args,
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), START_TIMEOUT_S)
    return proc.returncode or 0, err


#: The XMTP backends the core's test matrix runs on: a test given
#: `@pytest.mark.parametrize("backend", BACKENDS)` runs its daemon and peer on each
#: (tests/core/conftest.py).
BACKENDS: Final = ("v3", "d14n")


def short_home() -> Path:
    """A fresh state directory with a short path (Unix socket paths are ≤107 bytes),
    removed when the process exits if its user has not removed it before."""
    path = Path(tempfile.mkdtemp(prefix="cone-t-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


class DaemonProcess:
    """One daemon subprocess and a client on its socket."""

    def __init__(
        self,
        home: Path,
        api_url: str,
        extra_env: dict[str, str] | None = None,
        umask: int = -1,
        gateway_url: str | None = None,
    ) -> None:
        """`umask` is the daemon's (-1: this process's); `gateway_url` runs it on D14N."""
        self.home = home
        self.umask = umask
        self.api_url = api_url
        self.gateway_url = gateway_url
        self.env = {**os.environ, "CONE_CATCHUP_S": "2", **(extra_env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tempfile.TemporaryFile()  # closed in __aexit__
        self._client: ConeClient | None = None
        #: Whether a stop had to end the daemon with SIGKILL (tests of shutdown check it).
        self.needed_kill = False

    @property
    def socket(self) -> Path:
        return self.home / "cone.sock"

    @property
    def client(self) -> ConeClient:
        assert self._client is not None, "daemon not started"
        return self._client

    async def status(self) -> pb.StatusResponse:
        """The daemon's Status answer."""
        status: pb.StatusResponse = await self.client.call("Status", pb.StatusRequest())
        return status

    async def dm_from(self, peer: Peer) -> Any:
        """The DM `peer` finds or creates with this daemon's inbox (by inbox id)."""
        ident = await self.client.identity()
        return await peer.client.conversations().find_or_create_dm(
            ident.inbox_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
        )

    def args(self) -> list[str]:
        """The `cone` arguments that start this daemon."""
        args = ["daemon", "--home", str(self.home), "--api-url", self.api_url]
        return args + (["--gateway-url", self.gateway_url] if self.gateway_url else [])

    def command(self) -> list[str]:
        """The full command line."""
        return [sys.executable, "-m", "cone", *self.args()]

    async def start(self) -> DaemonProcess:
        """Start the process and wait until Identity answers."""
        # stderr goes to a file: a pipe nobody reads would block a chatty daemon.
        # Popen returns at once; waiting happens below without blocking the loop.
        self.proc = subprocess.Popen(  # noqa: ASYNC220
            self.command(), env=self.env, stderr=self.log, umask=self.umask
        )
        try:
            return await self._until_answering()
        except BaseException:
            # Never leave a process behind: an unreaped Popen warns in a later test.
            self.proc.kill()
            await asyncio.get_running_loop().run_in_executor(None, self.proc.wait)
            raise

    async def _until_answering(self) -> DaemonProcess:
        assert self.proc is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}: {self.stderr()}")
            if self.socket.exists():
                client = ConeClient(self.socket)
                try:
                    await client.identity()
                    self._client = client
                    return self
                except Unavailable:
                    await client.close()
            if loop.time() > deadline:
                raise TimeoutError("daemon did not answer")
            await asyncio.sleep(0.05)

    def stderr(self) -> str:
        """What the daemon wrote on stderr so far."""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def kill9(self) -> None:
        """SIGKILL the daemon (a crash)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    async def kill9_at_failpoint(self, marker: Path) -> None:
        """Wait until the daemon has stopped at its failpoint (`cone/_failpoints.py`
        writes `marker` there), then SIGKILL it."""

        async def stopped_there() -> bool:
            return await asyncio.to_thread(marker.exists)

        await until(stopped_there)
        self.kill9()

    async def restart_without_failpoint(self) -> DaemonProcess:
        """Start again on the same state directory, the `CONE_FAILPOINT*` settings
        dropped."""
        for name in [n for n in self.env if n.startswith("CONE_FAILPOINT")]:
            self.env.pop(name)
        return await self.restart()

    async def restart(self) -> DaemonProcess:
        """Start again on the same state directory."""
        if self._client is not None:
            await self._client.close()
            self._client = None
        return await self.start()

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send `sig` and wait for the exit, SIGKILLing by pid a daemon still there
        after STOP_WAIT_S (then `needed_kill` is set); returns the exit code."""
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        return await self.wait_exit(STOP_WAIT_S)

    async def wait_exit(self, timeout: float) -> int:
        """Wait up to `timeout` for the exit, then SIGKILL (`needed_kill`) and reap."""
        assert self.proc is not None
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(None, self.proc.wait, timeout)
        except subprocess.TimeoutExpired:
            self.needed_kill = True
            self.proc.kill()
            return await loop.run_in_executor(None, self.proc.wait)

    async def __aenter__(self) -> DaemonProcess:
        try:
            return await self.start()
        except BaseException:
            # No __aexit__ follows: its log would be left open, and its ResourceWarning
            # would fail whichever test the collector happens to run in.
            self.log.close()
            raise

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
        if self.needed_kill:
            # Only tests about shutdown fail on this (they check `needed_kill`).
            print(f"--- daemon {self.home.name} ignored SIGTERM: killed ---", file=sys.stderr)
        # pytest shows captured output only for a failing test: the daemon's side of it.
        print(f"--- daemon stderr ({self.home.name}) ---\n{self.stderr()}", file=sys.stderr)
        self.log.close()
