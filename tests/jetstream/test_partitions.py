"""Per-conversation order with many workers: one message of a partition out at a time,
so a stuck turn holds back its own partition and no other."""

from __future__ import annotations

import json
from pathlib import Path

from nats.aio.client import Client
from nats.errors import TimeoutError as NatsTimeout

from cone.jetstream.subjects import Layout, partition_of
from conepb.v1 import cone_pb2 as pb
from support.peers import Peer
from support.waiting import until

from ._worker import stored
from .conftest import Bridged

WAIT_S = 60.0


async def _peer_elsewhere(b: Bridged, devnet: str, tmp_path: Path) -> tuple[Peer, object, str]:
    """A peer whose DM with the daemon lands in another partition than the fixture's."""
    mine = partition_of(b.conversation_id, 4)
    for i in range(12):
        peer = await Peer.create(devnet, tmp_path, f"p{i}")
        contact = await b.daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))
        cid = contact.contact.conversation_id
        if partition_of(cid, 4) != mine:
            await peer.sync()
            return peer, peer.conversation(bytes.fromhex(cid)), cid
    raise AssertionError("no conversation in another partition after 12 peers")


async def test_a_stuck_turn_holds_back_only_its_own_partition(
    bridged: Bridged, nc: Client, devnet: str, tmp_path: Path
) -> None:
    layout = Layout("cone", bridged.inbox_id, 4)
    js = nc.jetstream()
    other, other_dm, other_cid = await _peer_elsewhere(bridged, devnet, tmp_path)

    def sub(cid: str):  # type: ignore[no-untyped-def]
        return js.pull_subscribe_bind(
            layout.partition_consumer(partition_of(cid, 4)), stream=layout.stream("in")
        )

    stuck_sub, free_sub = await sub(bridged.conversation_id), await sub(other_cid)
    await bridged.send("a1", "a2")
    (held,) = await stuck_sub.fetch(1, timeout=WAIT_S)  # a worker takes a1 and hangs
    assert json.loads(held.data)["text"] == "a1"
    await other.send(other_dm, "b1")
    (free,) = await free_sub.fetch(1, timeout=WAIT_S)  # another partition goes on
    assert json.loads(free.data)["text"] == "b1"
    await free.ack_sync()
    # a2 is in the stream, and waits behind a1 (max_ack_pending 1): nobody gets it
    # while a1 is out.

    async def both_stored() -> bool:
        return await stored(nc, layout) == 2

    await until(both_stored)
    try:
        early = await stuck_sub.fetch(1, timeout=1.0)
    except NatsTimeout:
        early = []
    assert early == []
    await held.ack_sync()
    (nxt,) = await stuck_sub.fetch(1, timeout=WAIT_S)
    assert json.loads(nxt.data)["text"] == "a2"
    await nxt.ack_sync()
