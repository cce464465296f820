"""Real libxmtp clients message each other through an in-process devnet."""

from __future__ import annotations

from pathlib import Path

from cone.engine._client import identifier
from support.peers import Peer


async def test_two_clients_exchange_100_messages_both_ways_by_sync_and_stream(
    devnet: str, tmp_path: Path
) -> None:
    alice = await Peer.create(devnet, tmp_path, "alice")
    bob = await Peer.create(devnet, tmp_path, "bob")
    assert await alice.client.find_inbox_id(bob.identifier()) == bob.inbox_id
    assert await bob.client.find_inbox_id(alice.identifier()) == alice.inbox_id
    alice_stream, bob_stream = await alice.stream_all(), await bob.stream_all()

    dm = await alice.dm_with(bob)
    await bob.sync()
    bob_dm = bob.conversation(dm.id())
    sent: list[str] = []
    for i in range(100):
        await alice.send(dm, f"a{i}")
        await bob.send(bob_dm, f"b{i}")
        sent += [f"a{i}", f"b{i}"]

    assert await bob_stream.texts(100) == [f"a{i}" for i in range(100)]
    assert await alice_stream.texts(100) == [f"b{i}" for i in range(100)]
    assert await alice.texts(dm.id()) == sent
    assert await bob.texts(dm.id()) == sent
    await alice_stream.end()
    await bob_stream.end()


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
    group = await alice.group_with(bob)
    await group.add_members([carol.inbox_id])  # added later
    carol_stream = await carol.stream_all()
    await bob.sync()
    await carol.sync()
    await alice.send(group, "before removal")
    assert await carol_stream.texts(1) == ["before removal"]

    await group.remove_members([carol.inbox_id])
    bob_group = bob.conversation(group.id())
    for i in range(3):
        await alice.send(group, f"after removal {i}")
        await bob.send(bob_group, f"bob after removal {i}")
    # Bob, still a member, is the witness that everything after the removal was sent.
    assert (await bob.texts(group.id()))[-6:] == [
        t for i in range(3) for t in (f"after removal {i}", f"bob after removal {i}")
    ]

    await carol.sync()
    carol_group = carol.conversation(group.id())
    assert not carol_group.is_active()
    assert await carol.texts(group.id(), sync=False) == ["before removal"]
    assert carol_stream.pending_texts() == []
    await carol_stream.end()


async def test_an_address_that_never_registered_is_not_reachable(
    devnet: str, tmp_path: Path
) -> None:
    alice = await Peer.create(devnet, tmp_path, "alice")
    bob = await Peer.create(devnet, tmp_path, "bob")
    stranger = "0x" + "5e" * 20
    reachable = await alice.client.can_message([bob.identifier(), identifier(stranger)])
    assert {i.identifier: ok for i, ok in reachable.items()} == {bob.address: True, stranger: False}
    assert await alice.client.find_inbox_id(identifier(stranger)) is None
