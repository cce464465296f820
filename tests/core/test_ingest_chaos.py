"""Chaos: steady inbound traffic across minute boundaries, kill -9, devnet faults.

Four raw libxmtp peers send one message a second each into four DMs and two groups
while the daemon is killed at random and the devnet drops streams, fails reads and
slows them. Two consumers receive and acknowledge, one never does, and the agent
sends keyed messages with retries. At the end every message a peer published is in
each acknowledging consumer's stream and acknowledged exactly once, never handed out
again after its ack; the lazy consumer's pending count equals the inbox; every key
reached its peer exactly once; and reconciliation healed nothing (the normal paths
took every message).

CI runs the bounded form, which always crosses a minute boundary of the daemon's clock
(libxmtp 1.10's insert stamps jump back there): the clock is the test's input
(support/daemon_clock.py), set 15 s before a boundary when the sending starts.
`CONE_SOAK=1 pytest -m soak tests/core/test_ingest_chaos.py` runs five minutes.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.core import content
from cone.devnet import Devnet
from cone.errors import ConeError
from conepb.v1 import cone_pb2 as pb
from support.daemon_clock import DaemonClock
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import until

SOAK = os.environ.get("CONE_SOAK") == "1"
ACKING = ("first", "second")
LAZY = "lazy"
KEYS = 40 if SOAK else 12


#: The kills the bounded form sees at least while the peers send.
KILLS = 5


@pytest.fixture
def clock(tmp_path: Path) -> DaemonClock:
    """The daemon's clock, at a second the setup runs to before the sending starts."""
    return DaemonClock.at_second(tmp_path, 30)


@pytest.fixture
async def daemon(home: Path, devnet: str, clock: DaemonClock) -> AsyncIterator[DaemonProcess]:
    """The core's daemon (tests/core/conftest.py), on `clock`."""
    async with clock.daemon(home, devnet) as d:
        yield d


def _sending_deadline(clock: DaemonClock) -> float:
    """Ten seconds past the daemon's next minute boundary (or five minutes for the
    soak, which crosses four boundaries or more), in real time."""
    if SOAK:
        return time.time() + 300
    return time.time() + (60 - clock.second()) + 10


class Holder:
    """The current daemon, across restarts; calls retry while it is down."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.up = asyncio.Event()
        self.up.set()

    async def call(self, method: str, request: Any) -> Any:
        while True:
            await self.up.wait()
            try:
                return await self.daemon.client.call(method, request, timeout=30)
            except (ConeError, AssertionError):
                await asyncio.sleep(0.05)  # down or restarting: the same request again


async def _group_with_daemon(owner: Peer, other: Peer, address: str) -> Any:
    mine = owner.identifier()
    daemon_id = mine.__class__(identifier=address, identifier_kind=mine.identifier_kind)
    opts = ffi.FfiCreateGroupOptions(
        permissions=None, group_name=None, group_image_url_square=None,
        group_description=None, custom_permission_policy_set=None,
        message_disappearing_settings=None, app_data=None,
    )  # fmt: skip
    return await owner.client.conversations().create_group_by_identity(
        [other.identifier(), daemon_id], opts
    )


async def _published_by(peer: Peer, conversation_id: bytes) -> set[str]:
    messages = await peer.messages(conversation_id)
    return {
        bytes(m.id).hex()
        for m in messages
        if m.sender_inbox_id == peer.inbox_id
        and m.kind == ffi.FfiConversationMessageKind.APPLICATION
        and m.delivery_status == ffi.FfiDeliveryStatus.PUBLISHED
    }


@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.timeout(900 if SOAK else 420)
async def test_every_inbound_message_reaches_every_consumer_exactly_once_under_chaos(
    daemon: DaemonProcess, devnet_node: Devnet, tmp_path: Path, clock: DaemonClock
) -> None:
    rng = random.Random(11)
    holder = Holder(daemon)
    peers = [await Peer.create(devnet_node.url, tmp_path, f"p{i}") for i in range(4)]
    ident = await daemon.client.identity()

    # Four accepted DMs and two groups (accepted once their welcomes arrive).
    conversations: list[tuple[Peer, Any]] = []
    dm_ids: dict[str, str] = {}
    for peer in peers:
        contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
        await peer.sync()
        conversations.append((peer, peer.conversation(bytes.fromhex(contact.conversation_id))))
        dm_ids[peer.inbox_id] = contact.conversation_id
    groups = [
        await _group_with_daemon(peers[0], peers[1], ident.address),
        await _group_with_daemon(peers[2], peers[3], ident.address),
    ]
    for group in groups:
        await group.send_text("hello group")
    group_ids = {bytes(g.id()).hex() for g in groups}

    async def groups_known() -> bool:
        held = await daemon.client.call("Requests", pb.RequestsRequest())
        return group_ids <= {r.conversation_id for r in held.requests}

    await until(groups_known)
    for gid in group_ids:
        await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=gid))
    await peers[1].sync()
    await peers[3].sync()
    conversations += [
        (peers[0], groups[0]),
        (peers[1], peers[1].conversation(bytes(groups[0].id()))),
    ]
    conversations += [
        (peers[2], groups[1]),
        (peers[3], peers[3].conversation(bytes(groups[1].id()))),
    ]
    await daemon.client.receive(consumer=LAZY, limit=1)  # the lazy consumer exists, acks nothing

    # 15 s before a minute boundary by the daemon's clock (which it reports).
    started = await clock.reach(daemon, 45, 50)
    deadline = _sending_deadline(clock)
    stop = asyncio.Event()  # ends the kills and faults
    drained_all = asyncio.Event()  # ends the consumers

    async def sender(peer: Peer, conversation: Any, n: int) -> None:
        i = 0
        # Until past the boundary, and through enough kills to mean something.
        while time.time() < deadline or kills < KILLS:
            try:
                await peer.send(conversation, f"{peer.name}-{n}-{i}")
            except Exception:  # an injected fault: this one may be lost by the peer; go on
                pass
            i += 1
            await asyncio.sleep(rng.uniform(0.6, 1.4))

    kills = 0

    async def killer() -> None:
        nonlocal kills
        while not stop.is_set():
            await asyncio.sleep(rng.uniform(3, 8))
            holder.up.clear()
            holder.daemon.kill9()
            kills += 1
            await holder.daemon.restart()
            holder.up.set()

    faults = 0

    async def fault_injector() -> None:
        nonlocal faults
        while not stop.is_set():
            await asyncio.sleep(rng.uniform(2, 5))
            choice = rng.randrange(3)
            if choice == 0:
                devnet_node.faults.drop_streams()
            elif choice == 1:
                devnet_node.faults.fail_next("QueryGroupMessages", rng.randint(1, 4))
            else:
                devnet_node.faults.set_latency("QueryGroupMessages", rng.uniform(0.1, 1.0))
            faults += 1
            await asyncio.sleep(rng.uniform(1, 3))
            devnet_node.faults.clear()

    handed: dict[str, list[str]] = {c: [] for c in ACKING}
    acked: dict[str, list[str]] = {c: [] for c in ACKING}
    late: list[tuple[str, str]] = []  # (consumer, id) handed out again after its ack

    async def consumer(name: str) -> None:
        done: set[str] = set()
        while not drained_all.is_set():
            batch = await holder.call(
                "Receive", pb.ReceiveRequest(consumer=name, limit=50, wait_ms=1000)
            )
            ids = [m.message_id for m in batch.messages]
            late.extend((name, i) for i in ids if i in done)
            handed[name].extend(ids)
            if ids:
                await holder.call("Ack", pb.AckRequest(consumer=name, message_ids=ids))
                acked[name].extend(i for i in ids if i not in done)
                done.update(ids)

    delivered_keys: list[str] = []

    async def agent() -> None:
        for k in range(KEYS):
            peer = peers[k % len(peers)]
            key = f"agent-{k}"
            await holder.call(
                "Send",
                pb.SendRequest(to=dm_ids[peer.inbox_id], text=f"payload {key}", key=key),
            )
            delivered_keys.append(key)
            await asyncio.sleep(rng.uniform(0.5, 2))

    background = [
        asyncio.create_task(killer()),
        asyncio.create_task(fault_injector()),
        *(asyncio.create_task(consumer(c)) for c in ACKING),
        asyncio.create_task(agent()),
    ]
    await asyncio.gather(*(sender(p, c, n) for n, (p, c) in enumerate(conversations)))

    async def synced_past_the_boundary() -> bool:  # the daemon's clock crossed it
        at = (await holder.call("Status", pb.StatusRequest())).last_sync_at
        return bool(at.seconds // 60 > started // 60)

    await until(synced_past_the_boundary)
    await background[-1]  # the agent's keys
    stop.set()
    await asyncio.gather(*background[:2])
    devnet_node.faults.clear()

    # What the peers published, by their own records: the truth to compare with.
    expected: set[str] = set()
    for peer, conversation in conversations:
        expected |= await _published_by(peer, bytes(conversation.id()))

    async def caught_up() -> bool:
        status = await holder.call("Status", pb.StatusRequest())
        return bool(status.inbox_messages >= len(expected))

    await until(caught_up, timeout=120)
    # Let the acking consumers drain, then stop them.
    for name in ACKING:

        async def drained(name: str = name) -> bool:
            return expected <= set(acked[name])

        await until(drained, timeout=120)
    drained_all.set()
    await asyncio.gather(*background[2:4])

    status = await holder.call("Status", pb.StatusRequest())
    assert kills >= (10 if SOAK else KILLS) and faults >= 5
    for name in ACKING:
        assert Counter(acked[name]) == Counter(expected), name
        assert set(handed[name]) == expected, name
    assert late == []
    assert status.inbox_messages == len(expected)
    assert dict((c.consumer, c.pending) for c in status.consumers)[LAZY] == len(expected)
    assert status.ingest_healed == 0
    print(f"{len(expected)} inbound messages, {kills} kill -9s, {faults} faults")

    # Every key reached its peer exactly once.
    seen_keys: Counter[str] = Counter()
    for peer in peers:
        for m in await peer.received(bytes.fromhex(dm_ids[peer.inbox_id])):
            key = content.decode(bytes(m.content)).send_key
            if key is not None:
                seen_keys[key] += 1
    assert seen_keys == Counter(delivered_keys)
