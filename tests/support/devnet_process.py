"""`cone devnet` in a subprocess, for tests where the process boundary is the subject."""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

#: Seconds to wait for the devnet to print its URL or to exit.
START_S = 30.0


@dataclass
class DevnetProcess:
    """A running `cone devnet`; stderr goes to a file beside its arguments."""

    process: asyncio.subprocess.Process
    url: str
    stderr_path: Path

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.url.rsplit(":", 1)[1])

    @classmethod
    async def start(
        cls, directory: Path, *args: str, env: dict[str, str] | None = None
    ) -> DevnetProcess:
        """Start `cone devnet --port 0 ARGS` (a later `--port` wins) and wait for its URL.

        In memory (`--ephemeral`) unless ARGS give `--db` or `env` is given: a test
        never writes into the user's state directory."""
        stderr_path = _next_log(directory)
        state = () if env is not None or "--db" in args else ("--ephemeral",)
        with stderr_path.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cone", "devnet", "--port", "0", *state, *args,
                stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env,
            )  # fmt: skip
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), START_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        if not line:
            await process.wait()
            raise RuntimeError(f"cone devnet exited: {stderr_path.read_text()}")
        return cls(process, line.decode().strip(), stderr_path)

    def stderr(self) -> str:
        """What it has written to stderr so far."""
        return self.stderr_path.read_text()

    async def kill(self) -> None:
        """SIGKILL it, as a crash would, and reap it."""
        self.process.kill()
        await self.process.wait()

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send `sig` and return its exit code once it has exited."""
        self.process.send_signal(sig)
        return await asyncio.wait_for(self.process.wait(), START_S)


def _next_log(directory: Path) -> Path:
    """A fresh stderr log path in `directory` (one per start, so restarts keep theirs)."""
    n = 0
    while (directory / f"devnet-{n}.log").exists():
        n += 1
    return directory / f"devnet-{n}.log"
