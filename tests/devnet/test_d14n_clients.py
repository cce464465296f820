"""Real libxmtp 1.10 clients in D14N mode (the devnet's URL as their gateway) message
each other through the devnet alone, and across the two APIs with V3 clients."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from cone.devnet import Devnet
from cone.engine import _client
from support import peers, scenarios
from support.devnet_process import DevnetProcess
from support.peers import WAIT_S, Peer

D14N_PREFIX = "/xmtp.xmtpv4."


def _d14n_calls(node: Devnet) -> set[str]:
    """The unary methods called so far that belong to the D14N API."""
    return {m for m in node.stats.methods if m.startswith(D14N_PREFIX)}


async def test_two_d14n_clients_exchange_dms_by_sync_and_stream_on_d14n_calls_only(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    alice = await Peer.create(url, tmp_path, "alice", d14n=True)
    bob = await Peer.create(url, tmp_path, "bob", d14n=True)
    assert await alice.client.find_inbox_id(bob.identifier()) == bob.inbox_id
    await scenarios.dm_both_ways(alice, bob, 60)  # 120 messages: more than a page of 100
    # Every unary call was a D14N one: the V3 API was never used.
    assert set(devnet_node.stats.methods) == _d14n_calls(devnet_node)
    assert {
        "/xmtp.xmtpv4.payer_api.PayerApi/PublishClientEnvelopes",
        "/xmtp.xmtpv4.payer_api.PayerApi/GetNodes",
        "/xmtp.xmtpv4.message_api.ReplicationApi/QueryEnvelopes",
        "/xmtp.xmtpv4.message_api.ReplicationApi/GetNewestEnvelope",
        "/xmtp.xmtpv4.message_api.ReplicationApi/GetInboxIds",
    } <= _d14n_calls(devnet_node)
    assert set(devnet_node.stats.streams) == {
        "/xmtp.xmtpv4.message_api.ReplicationApi/SubscribeEnvelopes"
    }


async def test_d14n_group_members_are_added_and_removed_and_a_new_client_reads_the_history(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    alice, bob, carol, dave = [
        await Peer.create(url, tmp_path, n, d14n=True) for n in ("alice", "bob", "carol", "dave")
    ]
    group = await scenarios.removed_member_gets_nothing_after(alice, bob, carol)
    bob_group = bob.conversation(group.id())

    # A member added after all of that joins at the right commit and talks.
    await bob_group.add_members([dave.inbox_id])
    dave_stream = await dave.stream_all()
    await dave.sync()
    dave_group = dave.conversation(group.id())
    await dave.send(dave_group, "dave joined")
    assert (await alice.texts(group.id()))[-1] == "dave joined"
    await alice.send(group, "welcome dave")
    assert await dave_stream.texts(1) == ["welcome dave"]
    assert set(devnet_node.stats.methods) == _d14n_calls(devnet_node)
    await dave_stream.end()


async def test_a_v3_client_and_a_d14n_client_share_a_group_and_a_dm_both_ways(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    v3 = await Peer.create(url, tmp_path, "v3")
    d14n = await Peer.create(url, tmp_path, "d14n", d14n=True)
    carol = await Peer.create(url, tmp_path, "carol", d14n=True)
    assert await v3.client.find_inbox_id(d14n.identifier()) == d14n.inbox_id
    assert await d14n.client.find_inbox_id(v3.identifier()) == v3.inbox_id
    v3_stream, d14n_stream = await v3.stream_all(), await d14n.stream_all()

    # A group made on V3; the D14N member adds a third (a D14N commit and welcome).
    group = await v3.group_with(d14n)
    await d14n.sync()
    d14n_group = d14n.conversation(group.id())
    await d14n_group.add_members([carol.inbox_id])
    await carol.sync()
    carol_group = carol.conversation(group.id())
    sent: list[str] = []
    for i in range(5):
        for peer, conversation in ((v3, group), (d14n, d14n_group), (carol, carol_group)):
            await peer.send(conversation, f"{peer.name}-{i}")
            sent.append(f"{peer.name}-{i}")
    for peer in (v3, d14n, carol):
        assert await peer.texts(group.id()) == sent
    assert await v3_stream.texts(10) == [t for t in sent if not t.startswith("v3")]
    assert await d14n_stream.texts(10) == [t for t in sent if not t.startswith("d14n")]

    # A DM made on D14N reaches the V3 client, and back.
    dm = await d14n.dm_with(v3)
    await d14n.send(dm, "to v3")
    assert await v3_stream.texts(1) == ["to v3"]
    await v3.sync()
    await v3.send(v3.conversation(dm.id()), "to d14n")
    assert await d14n_stream.texts(1) == ["to d14n"]
    assert await d14n.texts(dm.id()) == ["to v3", "to d14n"]
    await v3_stream.end()
    await d14n_stream.end()


async def test_d14n_clients_carry_on_across_a_devnet_killed_and_restarted_on_its_database(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "devnet.db")
    node = await DevnetProcess.start(tmp_path, "--db", db)
    url = node.url
    alice = await Peer.create(url, tmp_path, "alice", d14n=True)
    bob = await Peer.create(url, tmp_path, "bob", d14n=True)
    dm, bob_stream = await scenarios.streamed_dm(alice, bob)

    await node.kill()
    async with asyncio.timeout(WAIT_S):
        await bob_stream.closed.wait()
    # The same URL: libxmtp 1.10 keeps the node GetNodes named for the life of the client.
    node = await DevnetProcess.start(tmp_path, "--db", db, "--port", str(node.port))
    bob_stream = await bob.stream_all()
    for i in range(5, 10):
        await alice.send(dm, f"a{i}")
    assert await bob_stream.texts(5) == [f"a{i}" for i in range(5, 10)]
    await bob.sync()
    await bob.send(bob.conversation(dm.id()), "b0")
    assert await alice.texts(dm.id()) == [*(f"a{i}" for i in range(10)), "b0"]
    await bob_stream.end()
    assert await node.stop(signal.SIGTERM) == 0


async def test_after_the_v3_cutover_d14n_members_talk_on_and_a_v3_member_still_reads(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    v3 = await Peer.create(url, tmp_path, "v3")
    d14n = await Peer.create(url, tmp_path, "d14n", d14n=True)
    d14n_stream = await d14n.stream_all()
    group = await v3.group_with(d14n)
    await v3.send(group, "before the cutover")
    assert await d14n_stream.texts(1) == ["before the cutover"]

    devnet_node.faults.set_v3_cutover(True)
    await d14n.sync()
    d14n_group = d14n.conversation(group.id())
    await d14n.send(d14n_group, "after the cutover")
    assert await v3.texts(group.id()) == ["before the cutover", "after the cutover"]
    assert d14n_stream.errors == []
    await d14n_stream.end()


async def test_a_v3_database_reopened_in_d14n_mode_carries_on_with_nothing_lost_or_repeated(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    key, db_key = _client.generate_wallet_key(), os.urandom(32)
    db_path = str(tmp_path / "alice.db3")

    async def open_alice(gateway_url: str | None) -> Peer:
        client = await _client.open_client(
            api_url=url, db_path=db_path, db_key=db_key, wallet_key=key, gateway_url=gateway_url
        )
        return Peer("alice", client, key, _client.wallet_address(key), client.inbox_id())

    alice = await open_alice(None)
    bob = await Peer.create(url, tmp_path, "bob")
    group = await alice.group_with(bob)
    await bob.sync()
    bob_group = bob.conversation(group.id())
    expected: list[str] = []
    for i in range(3):
        await alice.send(group, f"alice-v3-{i}")
        await bob.send(bob_group, f"bob-v3-{i}")
        expected += [f"alice-v3-{i}", f"bob-v3-{i}"]
    assert await alice.texts(group.id()) == expected
    alice.close()

    # The same database on D14N: its V3 cursors hold under the migrator's originators.
    alice = await open_alice(url)
    peers.OPEN.append(alice)
    await bob.send(bob_group, "bob-after")
    await alice.send(alice.conversation(group.id()), "alice-d14n")
    expected += ["bob-after", "alice-d14n"]
    assert await alice.texts(group.id()) == expected
    assert await bob.texts(group.id()) == expected


async def test_d14n_streams_dropped_by_a_fault_resume_from_their_cursors_and_miss_nothing(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    alice = await Peer.create(url, tmp_path, "alice", d14n=True)
    bob = await Peer.create(url, tmp_path, "bob", d14n=True)
    dm, bob_stream = await scenarios.streamed_dm(alice, bob)
    assert devnet_node.faults.drop_streams() == devnet_node.open_streams > 0
    async with asyncio.timeout(WAIT_S):
        await bob_stream.closed.wait()
    await scenarios.nothing_missed_after_a_drop(alice, bob, dm)
