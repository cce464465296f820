"""The Python worker of docs/jetstream.md, run as written: it answers each message
once, and a worker killed mid-turn loses nothing (another one answers, once)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from nats.aio.client import Client

from support.nats import NatsServer
from support.peers import Peer
from support.waiting import until

from .conftest import Bridged, bridged_daemon, jetstream_env

DOC = Path(__file__).parents[2] / "docs" / "jetstream.md"
NODE_MODULES = Path(__file__).parents[1] / "node" / "node_modules"
NODE = shutil.which("node")


def worker_source(name: str = "worker.py") -> str:
    """The code block after `<!-- NAME -->` in the doc."""
    found = re.search(rf"<!-- {re.escape(name)} -->\n```\w+\n(.*?)```", DOC.read_text(), re.S)
    assert found, f"docs/jetstream.md lost its {name}"
    return found.group(1)


class Worker:
    """The doc's worker as a process; its stdout names each turn it takes."""

    def __init__(self, path: Path, server: NatsServer, inbox_id: str, think_s: float = 0.0) -> None:
        env = {
            **os.environ,
            "NATS_URL": server.url,
            "CONE_INBOX_ID": inbox_id,
            "CONE_PARTITIONS": "4",
            "THINK_S": str(think_s),
        }
        runner = [NODE or "node"] if path.suffix == ".mjs" else [sys.executable]
        self.proc = subprocess.Popen([*runner, str(path)], env=env, stdout=subprocess.PIPE)
        self.turns: list[str] = []
        self._reader = asyncio.get_running_loop().run_in_executor(None, self._read)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.turns.append(line.decode().strip())

    async def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        await asyncio.get_running_loop().run_in_executor(None, self.proc.wait)
        await self._reader
        assert self.proc.stdout is not None
        self.proc.stdout.close()


async def _echoes(b: Bridged, text: str) -> list[str]:
    async def seen() -> list[str] | None:
        texts = await b.peer.texts(bytes.fromhex(b.conversation_id))
        return texts if f"echo: {text}" in texts else None

    return await until(seen)


async def test_the_doc_worker_answers_once_and_survives_a_kill9_mid_turn(
    home: Path, devnet: str, alice: Peer, tmp_path: Path, nats_server: NatsServer, nc: Client
) -> None:
    path = tmp_path / "worker.py"
    path.write_text(worker_source())
    env = jetstream_env(nats_server.url, CONE_JETSTREAM_ACK_WAIT_S="2")
    daemon, b = await bridged_daemon(home, devnet, alice, env)
    workers: list[Worker] = []
    try:
        # A worker stuck in its turn (a model that hangs), then killed mid-turn.
        stuck = Worker(path, nats_server, b.inbox_id, think_s=3600)
        workers.append(stuck)
        await b.send("hello")

        async def taken() -> bool:
            return bool(stuck.turns)

        await until(taken)
        await stuck.stop()
        # Another worker takes the message after the ack wait and answers it.
        for _ in range(2):
            workers.append(Worker(path, nats_server, b.inbox_id, think_s=0))
        await _echoes(b, "hello")
        await b.send("more")
        texts = await _echoes(b, "more")
        assert texts.count("echo: hello") == 1
        assert texts.count("echo: more") == 1
    finally:
        for w in workers:
            await w.stop()
        await daemon.__aexit__(None, None, None)


async def test_the_doc_node_worker_answers(
    bridged: Bridged, nats_server: NatsServer, tmp_path: Path
) -> None:
    if NODE is None or not (NODE_MODULES / "@nats-io" / "jetstream").is_dir():
        pytest.skip("Node.js and tests/node's packages are needed (npm ci --prefix tests/node)")
    # The worker imports its packages from tests/node, as from a project of its own.
    (tmp_path / "node_modules").symlink_to(NODE_MODULES)
    path = tmp_path / "worker.mjs"
    path.write_text(worker_source("worker.mjs"))
    worker = Worker(path, nats_server, bridged.inbox_id)
    try:
        await bridged.send("from node")
        texts = await _echoes(bridged, "from node")
        assert texts.count("echo: from node") == 1
    finally:
        await worker.stop()
