"""Run `cone ...` as a user would: in a pseudo-terminal, or with stdout and stderr piped.

result = await cone_cli(["status", "--home", str(home)], tty=True)
assert result.code == 0 and "healthy" in result.out

With `tty=True` stdout and stderr are two pseudo-terminals (so a command sees a
terminal on each, as in an interactive shell, and their texts stay apart); line
endings come back as `\n`.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import sys
from dataclasses import dataclass
from typing import Any

RUN_S = 90.0


@dataclass
class CliResult:
    """What one `cone` run printed and how it exited."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout as one JSON document."""
        return json.loads(self.out)


def _drain(fd: int, sink: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every writer of the terminal has gone
            return
        if not chunk:
            return
        sink.extend(chunk)


async def cone_cli(
    args: list[str],
    *,
    tty: bool = False,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = RUN_S,
) -> CliResult:
    """Run `python -m cone ARGS` to completion without blocking the loop."""
    full_env = {**os.environ, **(env or {})}
    command = [sys.executable, "-m", "cone", *args]
    if not tty:
        proc = await asyncio.create_subprocess_exec(
            *command,
            env=full_env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
        return CliResult(proc.returncode or 0, out.decode(), err.decode())
    out_master, out_slave = pty.openpty()
    err_master, err_slave = pty.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            env=full_env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out_slave,
            stderr=err_slave,
        )
    finally:
        os.close(out_slave)
        os.close(err_slave)
    out_buf, err_buf = bytearray(), bytearray()
    loop = asyncio.get_running_loop()
    readers = [
        loop.run_in_executor(None, _drain, out_master, out_buf),
        loop.run_in_executor(None, _drain, err_master, err_buf),
    ]
    try:
        await asyncio.wait_for(proc.wait(), timeout)
        await asyncio.wait_for(asyncio.gather(*readers), 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        os.close(out_master)
        os.close(err_master)

    def text(buf: bytearray) -> str:
        return buf.decode(errors="replace").replace("\r\n", "\n")

    return CliResult(proc.returncode or 0, text(out_buf), text(err_buf))


__all__ = ["CliResult", "cone_cli"]
