"""Messaging scenarios that V3 clients and D14N clients both play (test_messaging,
test_resilience and test_d14n_clients): one text of each, whichever API carries it."""

from __future__ import annotations

from typing import Any

from support.peers import MessageStream, Peer


async def dm_both_ways(alice: Peer, bob: Peer, count: int) -> None:
    """Alice and Bob each send `count` messages in one DM, interleaved; both streams
    get the other's in order, and both histories hold all of them in order."""
    alice_stream, bob_stream = await alice.stream_all(), await bob.stream_all()
    dm = await alice.dm_with(bob)
    await bob.sync()
    bob_dm = bob.conversation(dm.id())
    sent: list[str] = []
    for i in range(count):
        await alice.send(dm, f"a{i}")
        await bob.send(bob_dm, f"b{i}")
        sent += [f"a{i}", f"b{i}"]

    assert await bob_stream.texts(count) == [f"a{i}" for i in range(count)]
    assert await alice_stream.texts(count) == [f"b{i}" for i in range(count)]
    assert await alice.texts(dm.id()) == sent
    assert await bob.texts(dm.id()) == sent
    await alice_stream.end()
    await bob_stream.end()


async def removed_member_gets_nothing_after(alice: Peer, bob: Peer, carol: Peer) -> Any:
    """Alice's group with Bob adds Carol, then removes her: Carol reads what came before
    and nothing after, which Alice and Bob both send. Returns the group (Alice's)."""
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
    after = [t for i in range(3) for t in (f"after removal {i}", f"bob after removal {i}")]
    assert await bob.texts(group.id()) == ["before removal", *after]

    await carol.sync()
    assert not carol.conversation(group.id()).is_active()
    assert await carol.texts(group.id(), sync=False) == ["before removal"]
    assert carol_stream.pending_texts() == []
    await carol_stream.end()
    return group


async def streamed_dm(alice: Peer, bob: Peer) -> tuple[Any, MessageStream]:
    """Bob streams; Alice opens a DM and sends a0 to a4, which Bob's stream gets.
    Returns the DM (Alice's) and Bob's stream."""
    bob_stream = await bob.stream_all()
    dm = await alice.dm_with(bob)
    for i in range(5):
        await alice.send(dm, f"a{i}")
    assert await bob_stream.texts(5) == [f"a{i}" for i in range(5)]
    return dm, bob_stream


async def nothing_missed_after_a_drop(alice: Peer, bob: Peer, dm: Any) -> None:
    """After Bob's stream closed (following `streamed_dm`): what Alice sends while Bob
    has none (a5 to a9 in the DM, a new group and g0) comes first on his next stream,
    then what she sends live (a10 to a14, g1), and his history has all of it."""
    for i in range(5, 10):
        await alice.send(dm, f"a{i}")
    group = await alice.group_with(bob)
    await alice.send(group, "g0")

    bob_stream = await bob.stream_all()
    caught_up = await bob_stream.texts(6)
    assert [t for t in caught_up if t.startswith("a")] == [f"a{i}" for i in range(5, 10)]
    assert "g0" in caught_up
    for i in range(10, 15):
        await alice.send(dm, f"a{i}")
    await alice.send(group, "g1")
    live = await bob_stream.texts(6)
    assert [t for t in live if t.startswith("a")] == [f"a{i}" for i in range(10, 15)]
    assert "g1" in live
    assert bob_stream.pending_texts() == []
    assert await bob.texts(dm.id()) == [f"a{i}" for i in range(15)]
    await bob_stream.end()
