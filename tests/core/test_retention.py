"""Peers' deletions and disappearing settings take content out of cone's store, on disk."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.config import STORE_NAME
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.pages import on_disk
from support.peers import Peer
from support.state import open_store, store_key
from support.waiting import receive_n, until


async def _connect(daemon: DaemonProcess, peer: Peer) -> tuple[Any, str]:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
    await peer.client.conversations().sync()
    return peer.conversation(bytes.fromhex(contact.conversation_id)), contact.conversation_id


async def _history(daemon: DaemonProcess, cid: str) -> list[pb.Message]:
    request = pb.MessagesRequest(conversation_id=cid, oldest_first=True, limit=1000)
    return list((await daemon.client.call("Messages", request)).messages)


async def _gone_from_disk(db: Path, key: bytes, needle: bytes) -> bool:
    """Whether `needle` is absent from every decrypted page of the store and its WAL."""
    return not await asyncio.to_thread(on_disk, db, key, needle)


def _rows(home: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    store = open_store(home)
    try:
        return store.read_now(lambda c: c.execute(sql, args).fetchall())
    finally:
        store.close()


async def test_a_peers_delete_takes_the_content_out_of_cones_store(
    daemon: DaemonProcess, alice: Peer
) -> None:
    dm, cid = await _connect(daemon, alice)
    await alice.send(dm, "keep me")
    first = await alice.send(dm, "first secret words")
    second = await alice.send(dm, "second secret words")
    got = await receive_n(daemon.client, 3, consumer="early")  # handed out, not acked
    assert [m.text for m in got] == ["keep me", "first secret words", "second secret words"]
    await daemon.client.ack([got[1].message_id], consumer="early")
    for message_id in (first, second):
        dm.delete_message(message_id)
    await dm.publish_messages()

    async def deleted() -> list[pb.Message]:
        found = await _history(daemon, cid)
        return found if sum(m.deleted for m in found) == 2 else []

    history = await until(deleted)
    assert [(m.text, m.deleted) for m in history] == [("keep me", False), ("", True), ("", True)]
    assert [m.message_id for m in history[1:]] == [first.hex(), second.hex()]

    # A consumer never handed them: withdrawn. One that was: they stay as they were,
    # without content, marked deleted.
    assert [m.text for m in (await daemon.client.receive(consumer="late")).messages] == ["keep me"]
    early = (await daemon.client.receive(consumer="early")).messages
    assert [(m.message_id, m.text, m.deleted) for m in early] == [
        (got[0].message_id, "keep me", False),
        (second.hex(), "", True),
    ]
    await daemon.client.ack([second.hex()], consumer="early")  # still acknowledgeable

    db, key = daemon.home / STORE_NAME, store_key(daemon.home)
    await until(lambda: _gone_from_disk(db, key, b"secret words"))  # while running
    await daemon.stop()
    rows = _rows(
        daemon.home,
        "SELECT id, text, fallback, removed FROM messages WHERE conversation_id = ? ORDER BY seq",
        cid,
    )
    assert rows[1:] == [(first.hex(), None, None, "deleted"), (second.hex(), None, None, "deleted")]
    assert on_disk(db, key, b"keep me")  # the check can see content that is there
    assert not on_disk(db, key, b"secret words")


async def test_a_two_second_disappearing_setting_expires_cones_copies(
    daemon: DaemonProcess, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    lasting_dm, _ = await _connect(daemon, bob)
    dm, cid = await _connect(daemon, alice)
    await bob.send(lasting_dm, "lasting words")
    await dm.update_conversation_message_disappearing_settings(
        ffi.FfiMessageDisappearingSettings(from_ns=time.time_ns(), in_ns=2_000_000_000)
    )
    await alice.send(dm, "ephemeral words")
    sent = await daemon.client.call("Send", pb.SendRequest(to=cid, text="own ephemeral", key="e"))
    assert sent.published

    async def both_taken_in() -> bool:
        status = await daemon.client.call("Status", pb.StatusRequest())
        return bool(status.inbox_messages == 2)

    await until(both_taken_in)

    async def expired() -> bool:
        return not [m for m in await _history(daemon, cid) if "ephemeral" in m.text]

    await until(expired, timeout=30)
    # Never handed out: withdrawn from receive, the lasting message still there.
    assert [m.text for m in (await daemon.client.receive()).messages] == ["lasting words"]

    db, key = daemon.home / STORE_NAME, store_key(daemon.home)
    await until(lambda: _gone_from_disk(db, key, b"ephemeral"))  # while running
    await daemon.stop()
    rows = _rows(
        daemon.home,
        "SELECT text, removed, removed_ns - sent_at_ns FROM messages WHERE conversation_id = ?",
        cid,
    )
    assert [(text, removed) for text, removed, _ in rows] == [(None, "expired")]
    after_ns = rows[0][2]
    assert 2_000_000_000 <= after_ns < 12_000_000_000  # on the same schedule, give or take
    (payload,) = _rows(daemon.home, "SELECT payload, message_id FROM outbox WHERE key = 'e'")
    assert payload == (b"", sent.message_id)  # the key still deduplicates; its content is gone
    assert on_disk(db, key, b"lasting words")
    assert not on_disk(db, key, b"ephemeral words")
    assert not on_disk(db, key, b"own ephemeral")


async def test_a_deletion_of_someone_elses_message_is_ignored(
    daemon: DaemonProcess, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    ident = await daemon.client.identity()
    group = await alice.group_with(bob)
    await group.add_members([ident.inbox_id])
    gid = bytes(group.id()).hex()

    async def known() -> bool:
        await daemon.client.call("Sync", pb.SyncRequest())
        found = (await daemon.client.call("Conversations", pb.ConversationsRequest())).conversations
        return any(c.conversation_id == gid for c in found)

    await until(known)
    await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=gid))
    await bob.client.conversations().sync()
    bobs = await bob.send(bob.conversation(group.id()), "bob's own words")
    forged = ffi.encode_delete_message(ffi.FfiDeleteMessage(message_id=bobs.hex()))
    await group.sync()
    await group.send(forged, ffi.FfiSendMessageOpts(should_push=False))
    await alice.send(group, "after the forged deletion")
    got = await receive_n(daemon.client, 2)
    assert [m.text for m in got] == ["bob's own words", "after the forged deletion"]
    history = await _history(daemon, gid)
    assert [(m.text, m.deleted) for m in history] == [
        ("bob's own words", False),
        ("after the forged deletion", False),
    ]
