"""The bridge relaying to a daemon that holds the identity, and `--timeout`."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import until

from ._helpers import accept, alive, dm_to, now, parked, settled, texts_when
from .conftest import Agent, BridgeProcess


async def test_the_bridge_relays_to_a_daemon_that_holds_the_identity(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    echo = agent('note("end")\nprint("relayed: " + turn["messages"][0]["text"])\n')
    async with (
        DaemonProcess(home, devnet) as daemon,
        BridgeProcess(home, devnet, echo.argv) as bridge,
    ):
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "via the daemon")
        await accept(bridge, dm)
        assert await texts_when(alice, dm, 2) == ["via the daemon", "relayed: via the daemon"]
        await settled(bridge)
        assert "relaying to" in bridge.stderr()
        assert daemon.proc is not None and daemon.proc.poll() is None


async def test_a_command_past_its_timeout_is_killed_with_its_process_group(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    hanging = agent(
        """\
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        note("spawned", child=child.pid)
        time.sleep(3600)
        """
    )
    options = ["--timeout", "0.5", "--max-attempts", "1"]
    async with BridgeProcess(home, devnet, hanging.argv, options) as bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "never answered")
        await accept(bridge, dm)
        (record,) = await until(lambda: parked(home))
        assert record["reason"] == "timeout" and record["attempts"] == 1
        (spawned,) = hanging.events("spawned")
        await until(lambda: now(not alive(spawned["pid"]) and not alive(spawned["child"])))
        await settled(bridge)
        assert await alice.texts(bytes(dm.id())) == ["never answered"]
        assert record["conversationId"] == bytes(dm.id()).hex()


async def test_cone_serve_relays_to_the_bridge_that_holds_the_identity(
    home: Path, devnet: str, agent: Callable[[str], Agent]
) -> None:
    echo = agent('print("x")\n')
    async with BridgeProcess(home, devnet, echo.argv) as bridge:
        ident = await bridge.client.identity()
        line = b'{"jsonrpc":"2.0","id":1,"method":"identity"}\n'
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cone", "serve", "--home", str(home),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(proc.communicate(line), 60)
        assert json.loads(out)["result"]["inboxId"] == ident.inbox_id
        assert proc.returncode == 0


async def test_a_relaying_bridge_rides_out_a_daemon_restart(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    echo = agent('note("end")\nprint("echo: " + turn["messages"][0]["text"])\n')
    async with (
        DaemonProcess(home, devnet) as daemon,
        BridgeProcess(home, devnet, echo.argv, ["--backoff", "0.05"]) as bridge,
    ):
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "before")
        await accept(bridge, dm)
        await texts_when(alice, dm, 2)
        daemon.kill9()
        await daemon.restart()
        await alice.send(dm, "after")
        assert await texts_when(alice, dm, 4) == ["before", "echo: before", "after", "echo: after"]
        assert bridge.proc is not None and bridge.proc.poll() is None
