"""The devnet across restarts and injected faults, with real libxmtp clients."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from cone.devnet import Devnet
from support import scenarios
from support.devnet_process import DevnetProcess
from support.peers import WAIT_S, Peer


async def _exchange(
    alice: Peer, dm: object, bob: Peer, bob_dm: object, numbers: range
) -> list[str]:
    sent: list[str] = []
    for i in numbers:
        await alice.send(dm, f"a{i}")
        await bob.send(bob_dm, f"b{i}")
        sent += [f"a{i}", f"b{i}"]
    return sent


async def test_a_devnet_killed_and_restarted_on_its_database_loses_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "devnet.db")
    node = await DevnetProcess.start(tmp_path, "--db", db)
    url = node.url
    alice, bob = await Peer.create(url, tmp_path, "alice"), await Peer.create(url, tmp_path, "bob")
    bob_stream = await bob.stream_all()
    dm = await alice.dm_with(bob)
    await bob.sync()
    bob_dm = bob.conversation(dm.id())
    sent = await _exchange(alice, dm, bob, bob_dm, range(10))
    assert await bob_stream.texts(10) == [f"a{i}" for i in range(10)]

    await node.kill()  # a crash mid-conversation: only committed state survives
    async with asyncio.timeout(WAIT_S):
        await bob_stream.closed.wait()
    node = await DevnetProcess.start(tmp_path, "--db", db, "--port", str(node.port))
    assert node.url == url

    bob_stream = await bob.stream_all()  # libxmtp does not resubscribe by itself
    sent += await _exchange(alice, dm, bob, bob_dm, range(10, 20))
    assert await bob_stream.texts(10) == [f"a{i}" for i in range(10, 20)]
    assert await alice.texts(dm.id()) == sent
    assert await bob.texts(dm.id()) == sent
    carol = await Peer.create(url, tmp_path, "carol")
    assert await carol.client.find_inbox_id(alice.identifier()) == alice.inbox_id
    group = await carol.group_with(alice, bob)
    await carol.send(group, "after the restart")
    await alice.sync()
    assert await alice.texts(group.id()) == ["after the restart"]

    await bob_stream.end()
    assert await node.stop(signal.SIGTERM) == 0
    assert "stopped" in node.stderr()


async def test_streams_dropped_by_a_fault_resume_from_their_cursor_and_miss_nothing(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    alice, bob = await Peer.create(url, tmp_path, "alice"), await Peer.create(url, tmp_path, "bob")
    dm, bob_stream = await scenarios.streamed_dm(alice, bob)

    opened = devnet_node.open_streams  # Bob's welcome and group streams
    assert opened == 2
    assert devnet_node.faults.drop_streams() == opened
    async with asyncio.timeout(WAIT_S):
        await bob_stream.closed.wait()
    assert devnet_node.open_streams == 0
    await scenarios.nothing_missed_after_a_drop(alice, bob, dm)


async def test_failures_and_latency_injected_from_python_reach_libxmtp(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    alice, bob = await Peer.create(url, tmp_path, "alice"), await Peer.create(url, tmp_path, "bob")
    dm = await alice.dm_with(bob)
    # libxmtp retries every failed call 5 times: 2 failures cost a retry, not the send.
    devnet_node.faults.fail_next("SendGroupMessages", 2)
    devnet_node.faults.set_latency("QueryGroupMessages", 0.05)
    await alice.send(dm, "through the faults")
    devnet_node.faults.clear()
    await bob.sync()
    assert await bob.texts(dm.id()) == ["through the faults"]
    assert devnet_node.faults.take_failure("/xmtp.mls.api.v1.MlsApi/SendGroupMessages") is None
