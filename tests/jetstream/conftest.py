"""Fixtures for the JetStream bridge: a real nats-server, a real daemon exporting to
it, and a libxmtp peer in an accepted conversation with the daemon."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.nats import NatsServer
from support.peers import Peer


@pytest.fixture
async def nats_server(tmp_path: Path) -> AsyncIterator[NatsServer]:
    """A started nats-server with JetStream and its own store directory."""
    async with NatsServer(tmp_path / "nats") as server:
        yield server


@pytest.fixture
async def nc(nats_server: NatsServer) -> AsyncIterator[Client]:
    """A NATS client of the test (a worker's connection)."""
    client = await nats.connect(nats_server.url)
    yield client
    await client.close()


@dataclass
class Bridged:
    """A daemon exporting to JetStream, and a peer it talks with."""

    daemon: DaemonProcess
    peer: Peer
    #: The daemon's inbox id (the second token of every subject).
    inbox_id: str
    #: The accepted DM between the two, as the daemon names it.
    conversation_id: str
    dm: object

    async def send(self, *texts: str) -> None:
        """The peer sends each text into the DM, in order."""
        for text in texts:
            await self.peer.send(self.dm, text)


def jetstream_env(server_url: str, **extra: str) -> dict[str, str]:
    """The environment that turns the bridge on (what an operator sets)."""
    return {"CONE_JETSTREAM": server_url, "CONE_JETSTREAM_PARTITIONS": "4", **extra}


async def bridged_daemon(
    home: Path, devnet: str, alice: Peer, env: dict[str, str]
) -> tuple[DaemonProcess, Bridged]:
    """Start a daemon with `env` and connect it with `alice` (an accepted DM)."""
    daemon = DaemonProcess(home, devnet, extra_env=env)
    await daemon.start()
    try:
        ident = await daemon.client.identity()
        contact = await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))
        cid = contact.contact.conversation_id
        await alice.sync()
        dm = alice.conversation(bytes.fromhex(cid))
    except BaseException:
        await daemon.__aexit__(None, None, None)
        raise
    return daemon, Bridged(daemon, alice, ident.inbox_id, cid, dm)


@pytest.fixture
async def bridged(
    home: Path, devnet: str, alice: Peer, nats_server: NatsServer
) -> AsyncIterator[Bridged]:
    """A daemon exporting to `nats_server` (4 partitions) and a peer in a DM with it."""
    daemon, b = await bridged_daemon(home, devnet, alice, jetstream_env(nats_server.url))
    try:
        yield b
    finally:
        await daemon.__aexit__(None, None, None)
