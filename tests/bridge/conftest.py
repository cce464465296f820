"""Fixtures for bridge tests: `cone bridge` as a real subprocess on the devnet, agent
scripts written to the test's directory, and raw libxmtp peers."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer

# Every agent script starts with this: it reads the turn and logs start/end lines
# (JSON, appended atomically) to the file named by its first argument.
_PRELUDE = """\
import json, os, sys, time
LOG = sys.argv[1]
turn = json.load(sys.stdin)
def note(event, **extra):
    line = json.dumps({
        "event": event, "turnId": turn["turnId"], "attempt": turn["attempt"],
        "conversationId": turn["conversationId"], "type": turn["conversationType"],
        "texts": [m.get("text") for m in turn["messages"]],
        "context": [m.get("text") for m in turn["context"]],
        "env": {k: v for k, v in os.environ.items() if k.startswith("CONE_")},
        "pid": os.getpid(), "t": time.time(), **extra,
    })
    fd = os.open(LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, (line + "\\n").encode())
    os.close(fd)
note("start")
"""


class Agent:
    """An agent script and its log."""

    def __init__(self, directory: Path, body: str) -> None:
        self.dir = directory
        self.log = directory / "agent.log"
        self.script = directory / "agent.py"
        self.script.write_text(_PRELUDE + textwrap.dedent(body))

    @property
    def argv(self) -> list[str]:
        return [sys.executable, str(self.script), str(self.log)]

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        """Logged lines, oldest first, optionally only one kind."""
        try:
            lines = self.log.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = [json.loads(line) for line in lines]
        return [e for e in out if event is None or e["event"] == event]


class BridgeProcess(DaemonProcess):
    """`cone bridge OPTIONS -- AGENT` on a test home; `client` talks to its socket."""

    def __init__(
        self,
        home: Path,
        api_url: str,
        agent: list[str],
        options: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(home, api_url, extra_env)
        self.agent = agent
        self.options = options or []

    def args(self) -> list[str]:
        return [
            "bridge", "--home", str(self.home), "--api-url", self.api_url,
            *self.options, "--", *self.agent,
        ]  # fmt: skip

    async def pending(self, consumer: str = "bridge") -> int:
        """Messages the consumer has not acknowledged (from Status)."""
        status = await self.client.call("Status", pb.StatusRequest())
        return sum(c.pending for c in status.consumers if c.consumer == consumer)


@pytest.fixture
def agent(tmp_path: Path) -> Callable[[str], Agent]:
    """`agent(body)`: an agent script whose body runs after the prelude."""
    return lambda body: Agent(tmp_path, body)


@pytest.fixture
async def alice(devnet: str, tmp_path: Path) -> Peer:
    return await Peer.create(devnet, tmp_path, "alice")


@pytest.fixture
async def bob(devnet: str, tmp_path: Path) -> Peer:
    return await Peer.create(devnet, tmp_path, "bob")
