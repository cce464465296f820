"""Taking in new conversations while cone runs: bursts, and the follow-up syncs.

A real daemon, devnet and libxmtp peers. The daemon's periodic catch-up is put out
of reach (an hour), so what arrives arrives by the streams and the follow-up syncs
of new conversations alone (cone/core/intake/followups.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import Devnet
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer, plain_group_options
from support.waiting import receive_n, until

NO_CATCH_UP = {"CONE_CATCHUP_S": "3600"}


@pytest.fixture
async def daemon(home: Path, devnet: str) -> AsyncIterator[DaemonProcess]:
    """A daemon whose catch-up never runs during a test."""
    async with DaemonProcess(home, devnet, NO_CATCH_UP) as d:
        yield d


async def _open(peer: Peer, inbox_id: str, groups: int) -> list[tuple[str, str]]:
    """The peer's DM with `inbox_id` and `groups` groups, made at once, each with its
    first message sent as soon as it exists: (conversation id, text) of each."""

    async def one(i: int) -> tuple[str, str]:
        if i == 0:
            conv = await peer.client.conversations().find_or_create_dm(inbox_id, _dm_options())
        else:
            conv = await peer.client.conversations().create_group([inbox_id], plain_group_options())
        text = f"{peer.name} first {i}"
        await peer.send(conv, text)
        return bytes(conv.id()).hex(), text

    dm = await one(0)  # the DM first: two at once would make two DMs
    return [dm, *await asyncio.gather(*(one(i) for i in range(1, groups + 1)))]


async def _held(daemon: DaemonProcess, ids: set[str], timeout: float) -> dict[str, int]:
    """Wait until every conversation is held as a request with a message; the
    pending count of each."""

    async def all_held() -> dict[str, int] | None:
        requests = await daemon.client.call("Requests", pb.RequestsRequest())
        held = {r.conversation_id: r.pending_messages for r in requests.requests}
        return held if all(held.get(c, 0) >= 1 for c in ids) else None

    return await until(all_held, timeout=timeout)


async def _accept_and_receive(daemon: DaemonProcess, sent: dict[str, str]) -> None:
    """Accept each conversation; receive must hand over exactly the sent texts, once."""
    for cid in sent:
        await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=cid))
    got = await receive_n(daemon.client, len(sent), timeout=120)
    assert sorted((m.conversation_id, m.text) for m in got) == sorted(sent.items())
    await daemon.client.call("Ack", pb.AckRequest(message_ids=[m.message_id for m in got]))
    again = await daemon.client.receive(limit=1000, wait_ms=0)
    assert list(again.messages) == []


async def test_fifty_new_conversations_from_five_peers_at_once_are_each_received_once(
    daemon: DaemonProcess, devnet: str, tmp_path: Path
) -> None:
    inbox_id = (await daemon.client.identity()).inbox_id
    peers = [await Peer.create(devnet, tmp_path, f"peer{i}") for i in range(5)]
    made = await asyncio.gather(*(_open(p, inbox_id, 9) for p in peers))
    sent = dict(pair for pairs in made for pair in pairs)
    assert len(sent) == 50
    held = await _held(daemon, set(sent), timeout=300)
    assert {cid: held[cid] for cid in sent} == dict.fromkeys(sent, 1)
    await _accept_and_receive(daemon, sent)


async def _streams(daemon: DaemonProcess) -> dict[str, pb.StreamHealth]:
    status = await daemon.client.call("Status", pb.StatusRequest())
    return {s.name: s for s in status.streams}


async def test_first_messages_sent_while_the_message_stream_is_down_arrive_by_follow_up_syncs(
    daemon: DaemonProcess, devnet_node: Devnet, tmp_path: Path
) -> None:
    # The bad timing the follow-up syncs guard, held for the whole test: cone's
    # message streams cannot resubscribe (as while libxmtp resubscribes to take in a
    # new group), so a first message sent into a new group reaches libxmtp's
    # database only by a sync; the conversation stream still reports the groups.
    inbox_id = (await daemon.client.identity()).inbox_id
    alice = await Peer.create(devnet_node.url, tmp_path, "alice")
    bob = await Peer.create(devnet_node.url, tmp_path, "bob")
    devnet_node.faults.fail_next("SubscribeGroupMessages", 100_000)
    assert devnet_node.faults.drop_streams() > 0

    async def only_conversations_back() -> bool:
        streams = await _streams(daemon)
        return streams["conversations"].connected and streams["conversations"].restarts > 0

    await until(only_conversations_back)
    made = await asyncio.gather(_open(alice, inbox_id, 3), _open(bob, inbox_id, 3))
    sent = dict(pair for pairs in made for pair in pairs)
    held = await _held(daemon, set(sent), timeout=120)
    assert {cid: held[cid] for cid in sent} == dict.fromkeys(sent, 1)
    streams = await _streams(daemon)
    assert not streams["messages"].connected and not streams["requests"].connected  # never back
    devnet_node.faults.clear()
    await _accept_and_receive(daemon, sent)


def _dm_options() -> ffi.FfiCreateDmOptions:
    return ffi.FfiCreateDmOptions(message_disappearing_settings=None)
