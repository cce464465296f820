"""Nothing is lost across kill -9, stream drops and a failing network."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from cone.devnet import Devnet
from cone.errors import Unavailable
from conepb.v1 import cone_pb2 as pb
from support.daemons import BACKENDS, DaemonProcess
from support.peers import Peer
from support.waiting import receive_n, until


async def _accepted_dm(daemon: DaemonProcess, peer: Peer) -> object:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
    await peer.sync()
    return peer.conversation(bytes.fromhex(contact.conversation_id))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_kill9_after_ingest_before_ack_redelivers(daemon: DaemonProcess, alice: Peer) -> None:
    dm = await _accepted_dm(daemon, alice)
    await alice.send(dm, "survive the crash")
    (first,) = await receive_n(daemon.client, 1)
    daemon.kill9()
    await daemon.restart()
    (again,) = await receive_n(daemon.client, 1)
    assert (again.message_id, again.text) == (first.message_id, "survive the crash")
    assert again.deliveries == 2


async def test_kill9_right_after_a_long_poll_was_answered_redelivers(
    daemon: DaemonProcess, alice: Peer
) -> None:
    # The waiting poll is answered from the commit that stores the message
    # (cone/core/intake/waiters.py): the message and its delivery are on disk by then.
    dm = await _accepted_dm(daemon, alice)
    poll = asyncio.create_task(daemon.client.receive(consumer="p", wait_ms=30_000))
    await alice.send(dm, "answered, then killed")
    (first,) = (await poll).messages
    daemon.kill9()
    await daemon.restart()
    (again,) = await receive_n(daemon.client, 1, consumer="p")
    assert (again.message_id, again.text) == (first.message_id, "answered, then killed")
    assert (first.deliveries, again.deliveries) == (1, 2)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_burst_of_200_across_kill9_loses_nothing(
    daemon: DaemonProcess, alice: Peer
) -> None:
    dm = await _accepted_dm(daemon, alice)
    sent = [f"burst-{i:03d}" for i in range(200)]
    for text in sent[:100]:
        await alice.send(dm, text)
    await receive_n(daemon.client, 1)  # the daemon is ingesting when it dies
    daemon.kill9()
    for text in sent[100:]:
        await alice.send(dm, text)
    await daemon.restart()
    got = await receive_n(daemon.client, 200, timeout=120)
    assert [m.text for m in got] == sent
    assert len({m.message_id for m in got}) == 200


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_dropped_stream_loses_nothing(
    daemon: DaemonProcess, alice: Peer, devnet_node: Devnet
) -> None:
    dm = await _accepted_dm(daemon, alice)
    await alice.send(dm, "before the drop")
    await receive_n(daemon.client, 1)
    assert devnet_node.faults.drop_streams() > 0
    for i in range(5):
        await alice.send(dm, f"after the drop {i}")
    got = await receive_n(daemon.client, 6)
    assert [m.text for m in got] == ["before the drop"] + [f"after the drop {i}" for i in range(5)]

    async def restarted() -> bool:
        status = await daemon.client.call("Status", pb.StatusRequest())
        return all(s.connected for s in status.streams) and any(s.restarts for s in status.streams)

    await until(restarted)


async def test_a_refusing_network_makes_sync_and_empty_receive_fail(
    daemon: DaemonProcess, devnet_node: Devnet
) -> None:
    devnet_node.faults.fail_next("QueryWelcomeMessages", 1000, grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(Unavailable) as err:
        await daemon.client.call("Sync", pb.SyncRequest())
    assert err.value.reason == "sync_failed"
    with pytest.raises(Unavailable) as err:
        await daemon.client.receive(wait_ms=100)
    assert err.value.reason == "sync_failed"
    devnet_node.faults.clear()
    await daemon.client.call("Sync", pb.SyncRequest())
    assert (await daemon.client.receive(wait_ms=0)).messages == []


async def test_no_plaintext_message_text_in_any_file(daemon: DaemonProcess, alice: Peer) -> None:
    marker = "PLAINTEXT-MARKER-7c1f"
    dm = await _accepted_dm(daemon, alice)
    for i in range(20):
        await alice.send(dm, f"{marker} {i}")
    await receive_n(daemon.client, 20)
    await daemon.stop()
    for f in daemon.home.rglob("*"):
        if f.is_file():
            assert marker.encode() not in f.read_bytes(), f.name
