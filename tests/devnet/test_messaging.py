"""Real libxmtp clients message each other through an in-process devnet."""

from __future__ import annotations

from pathlib import Path

from cone.engine._client import identifier
from support import scenarios
from support.peers import Peer


async def test_two_clients_exchange_100_messages_both_ways_by_sync_and_stream(
    devnet: str, tmp_path: Path
) -> None:
    alice = await Peer.create(devnet, tmp_path, "alice")
    bob = await Peer.create(devnet, tmp_path, "bob")
    assert await alice.client.find_inbox_id(bob.identifier()) == bob.inbox_id
    assert await bob.client.find_inbox_id(alice.identifier()) == alice.inbox_id
    await scenarios.dm_both_ways(alice, bob, 100)


async def test_three_clients_share_a_group_and_a_dm_by_sync_and_stream(
    devnet: str, tmp_path: Path
) -> None:
    alice, bob, carol = [await Peer.create(devnet, tmp_path, n) for n in ("alice", "bob", "carol")]
    streams = {p.name: await p.stream_all() for p in (alice, bob, carol)}

    group = await alice.group_with(bob, carol)
    dm = await bob.dm_with(carol)
    for peer in (bob, carol):
        await peer.sync()
    in_group = {p.name: p.conversation(group.id()) for p in (alice, bob, carol)}
    carol_dm = carol.conversation(dm.id())

    sent: list[str] = []
    for i in range(34):  # 102 group messages, every member sending
        for peer in (alice, bob, carol):
            text = f"{peer.name}-{i}"
            await peer.send(in_group[peer.name], text)
            sent.append(text)
    for i in range(5):
        await bob.send(dm, f"dm-bob-{i}")
        await carol.send(carol_dm, f"dm-carol-{i}")

    for peer in (alice, bob, carol):
        expected = [t for t in sent if not t.startswith(peer.name)]
        if peer is bob:
            expected += [f"dm-carol-{i}" for i in range(5)]
        if peer is carol:
            expected += [f"dm-bob-{i}" for i in range(5)]
        got = await streams[peer.name].texts(len(expected))
        assert sorted(got) == sorted(expected)
        # Per conversation, the stream keeps the send order.
        assert [t for t in got if not t.startswith("dm-")] == [
            t for t in expected if not t.startswith("dm-")
        ]
        assert await peer.texts(group.id()) == sent
    dm_texts = [t for i in range(5) for t in (f"dm-bob-{i}", f"dm-carol-{i}")]
    assert await bob.texts(dm.id()) == dm_texts
    assert await carol.texts(dm.id()) == dm_texts
    for stream in streams.values():
        await stream.end()


async def test_removed_member_receives_nothing_sent_after_removal(
    devnet: str, tmp_path: Path
) -> None:
    alice, bob, carol = [await Peer.create(devnet, tmp_path, n) for n in ("alice", "bob", "carol")]
    await scenarios.removed_member_gets_nothing_after(alice, bob, carol)


async def test_an_address_that_never_registered_is_not_reachable(
    devnet: str, tmp_path: Path
) -> None:
    alice = await Peer.create(devnet, tmp_path, "alice")
    bob = await Peer.create(devnet, tmp_path, "bob")
    stranger = "0x" + "5e" * 20
    reachable = await alice.client.can_message([bob.identifier(), identifier(stranger)])
    assert {i.identifier: ok for i, ok in reachable.items()} == {bob.address: True, stranger: False}
    assert await alice.client.find_inbox_id(identifier(stranger)) is None
