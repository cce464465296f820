"""The start on a store: answers from the store at once, the read and the first sync
after, and the first sync reading only conversations whose newest message changed.

Each bad timing is forced by a failpoint (cone/_failpoints.py) in the real daemon."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.state import open_xmtp_db
from support.waiting import receive_n, until

STARTING = "cone is starting"


def ffi_text(text: str) -> bytes:
    """A text message's encoded content, as libxmtp stores it (as in test_ingest)."""
    return b"\n\x12\n\x08xmtp.org\x12\x04text\x18\x01\x12\x11\n\x08encoding\x12\x05UTF-8" + (
        b'"' + bytes([len(text.encode())]) + text.encode()
    )


async def _accepted_dm(daemon: DaemonProcess, peer: Peer) -> object:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
    await peer.sync()
    return peer.conversation(bytes.fromhex(contact.conversation_id))


def _hold(daemon: DaemonProcess, failpoint: str, tmp_path: Path, *, release: bool) -> Path:
    """Hold the next start at `failpoint`; returns the file made when it is reached
    (with `release`, the file tmp_path/"release" lets it go on)."""
    held = tmp_path / f"held-{failpoint}"
    daemon.env.update(CONE_FAILPOINT=failpoint, CONE_FAILPOINT_FILE=str(held))
    if release:
        daemon.env["CONE_FAILPOINT_RELEASE"] = str(tmp_path / "release")
    return held


async def _stale(daemon: DaemonProcess) -> bool:
    answer = await daemon.client.call("Conversations", pb.ConversationsRequest())
    return bool(answer.stale)


async def test_receive_answers_from_the_store_before_the_start_reads_and_syncs(
    daemon: DaemonProcess, alice: Peer, tmp_path: Path
) -> None:
    """Held before the start's read: `receive` hands out what the store holds, the
    answers from the store say `stale` and status says cone is starting; the message
    sent while cone was stopped enters once the start goes on, and `stale` clears."""
    dm = await _accepted_dm(daemon, alice)
    await alice.send(dm, "before the stop")
    await receive_n(daemon.client, 1)  # received, not acked: still pending
    await daemon.stop()
    await alice.send(dm, "while stopped")

    held = _hold(daemon, "start_read", tmp_path, release=True)
    await daemon.restart()
    await until(lambda: asyncio.to_thread(held.exists))
    got = await daemon.client.receive(limit=10, wait_ms=0)
    assert [m.text for m in got.messages] == ["before the stop"]
    assert await _stale(daemon)
    status = await daemon.client.call("Status", pb.StatusRequest())
    assert any(STARTING in w for w in status.warnings)

    (tmp_path / "release").touch()
    got_all = await receive_n(daemon.client, 2)
    assert [m.text for m in got_all] == ["before the stop", "while stopped"]

    async def fresh() -> bool:
        return not await _stale(daemon)

    await until(fresh)
    status = await daemon.client.call("Status", pb.StatusRequest())
    assert not any(STARTING in w for w in status.warnings)


async def test_the_first_sync_reads_a_conversation_whose_newest_message_is_new(
    daemon: DaemonProcess, alice: Peer, tmp_path: Path
) -> None:
    """A message libxmtp stores between the start's read and the first sync (written
    into its database while the start is held there) is read by that sync: its
    listing shows a new newest message. The full reconciliation is held too (and with
    it the catch-up's window check), so no other path could bring it in."""
    dm = await _accepted_dm(daemon, alice)
    await alice.send(dm, "read at the start")
    await receive_n(daemon.client, 1)
    await daemon.stop()
    xmtp = open_xmtp_db(daemon.home)  # opened while stopped: the key is in cone's store
    try:
        daemon.env.update(
            CONE_FAILPOINT="start_streams,reconcile_all",
            CONE_FAILPOINT_FILE=str(tmp_path / "held"),
            CONE_FAILPOINT_RELEASE=str(tmp_path / "release"),
        )
        await daemon.restart()
        await until(lambda: asyncio.to_thread((tmp_path / "held-start_streams").exists))
        xmtp.execute("PRAGMA busy_timeout = 10000")
        gid, installation, sender = xmtp.execute(
            "SELECT group_id, sender_installation_id, sender_inbox_id FROM group_messages"
            " WHERE kind = 1 AND sender_inbox_id = ?",
            (alice.inbox_id,),
        ).fetchone()
        now = time.time_ns()
        xmtp.execute(
            "INSERT INTO group_messages (id, group_id, decrypted_message_bytes, sent_at_ns,"
            " kind, sender_installation_id, sender_inbox_id, delivery_status, content_type,"
            " version_major, version_minor, authority_id, originator_id, sequence_id,"
            " inserted_at_ns, should_push) VALUES (?, ?, ?, ?, 1, ?, ?, 2, 1, 1, 0,"
            " 'xmtp.org', 10, 0, ?, 1)",
            (os.urandom(32), gid, ffi_text("stored after the read"), now, installation, sender,
             now),
        )  # fmt: skip
    finally:
        xmtp.close()
    (tmp_path / "release-start_streams").touch()
    await until(lambda: asyncio.to_thread((tmp_path / "held-reconcile_all").exists))
    got = await receive_n(daemon.client, 2)
    assert [m.text for m in got] == ["read at the start", "stored after the read"]
    assert not (tmp_path / "release-reconcile_all").exists()  # still held


async def test_a_message_arriving_during_the_first_sync_is_received(
    daemon: DaemonProcess, alice: Peer, tmp_path: Path
) -> None:
    """Held after the first sync fetched from the network and before it reads: a
    message sent then arrives (the stream is open; the sync's listing shows it too)."""
    dm = await _accepted_dm(daemon, alice)
    await alice.send(dm, "before the stop")
    await receive_n(daemon.client, 1)
    await daemon.stop()
    await alice.send(dm, "while stopped")

    held = _hold(daemon, "sync_read", tmp_path, release=True)
    await daemon.restart()
    await until(lambda: asyncio.to_thread(held.exists))
    await alice.send(dm, "during the sync")
    (tmp_path / "release").touch()
    got = await receive_n(daemon.client, 3)
    assert sorted(m.text for m in got) == ["before the stop", "during the sync", "while stopped"]
