"""Running one attempt of the agent's command, on both spawn paths, without a network."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cone.bridge import _agent
from cone.bridge._agent import run_agent
from support.waiting import until

from ._helpers import alive, now


@pytest.fixture(params=["direct", "threads"])
def spawn_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "threads":
        monkeypatch.setattr(_agent, "_DIRECT", False)
    elif not _agent._DIRECT:
        pytest.skip("no posix_spawn/pidfd here")
    yield request.param


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def test_stdin_in_stdout_out_and_the_exit_code(spawn_path: str) -> None:
    turn = '{"text": "héllo"}'.encode()
    echo = "import sys; sys.stdout.write(sys.stdin.read())"
    outcome = await run_agent(_py(echo), turn, dict(os.environ), 30)
    assert outcome.ok and outcome.stdout == turn
    failed = await run_agent(_py("import sys; sys.exit(3)"), b"{}", dict(os.environ), 30)
    assert not failed.ok and failed.describe() == "exit 3"
    ignoring = await run_agent(_py("print('no stdin read')"), b"x" * 1_000_000, {}, 30)
    assert ignoring.ok and ignoring.stdout == b"no stdin read\n"


async def test_a_timeout_kills_the_whole_process_group(spawn_path: str, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    code = (
        "import os, subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{c.pid}}')\n"
        "time.sleep(600)\n"
    )
    outcome = await run_agent(_py(code), b"", dict(os.environ), 1.0)
    assert outcome.timed_out and outcome.describe() == "timeout"
    parent, child = map(int, pids.read_text().split())
    await until(lambda: now(not alive(parent) and not alive(child)), timeout=10)


async def test_cancelling_stops_the_command(spawn_path: str, tmp_path: Path) -> None:
    started: list[int] = []
    task = asyncio.create_task(
        run_agent(_py("import time; time.sleep(600)"), b"", {}, 600, started.append)
    )
    await until(lambda: now(bool(started)))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not alive(started[0])


async def test_a_missing_command_raises(spawn_path: str) -> None:
    with pytest.raises(FileNotFoundError):
        await run_agent(["/nonexistent/agent"], b"", {}, 5)
