"""Receive, ack, consent and requests against real libxmtp peers on the devnet."""

from __future__ import annotations

import asyncio

import pytest

from cone.errors import FailedPrecondition, NotFound
from conepb.v1 import cone_pb2 as pb
from support.daemons import BACKENDS, DaemonProcess
from support.peers import Peer
from support.shared import *  # noqa: F403 (the fixtures that share a devnet and daemons)
from support.waiting import receive_n, until

# One devnet and one daemon per backend for the module (tests/support/shared.py). A
# consumer other than the default one sees what earlier tests left it: a test reads
# its own conversation's messages.
pytestmark = pytest.mark.asyncio(loop_scope="module")


def _texts_in(conversation_id: str, batch: pb.ReceiveResponse) -> list[str]:
    return [m.text for m in batch.messages if m.conversation_id == conversation_id]


async def _dm_from(peer: Peer, daemon: DaemonProcess) -> object:
    ident = await daemon.client.identity()
    ffi_id = peer.identifier().__class__(
        identifier=ident.address, identifier_kind=peer.identifier().identifier_kind
    )
    from xmtp_bindings import xmtpv3 as ffi

    return await peer.client.conversations().find_or_create_dm_by_identity(
        ffi_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
    )


async def _requests(daemon: DaemonProcess) -> list[pb.ConversationRequest]:
    return list((await daemon.client.call("Requests", pb.RequestsRequest())).requests)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_strangers_dm_is_a_request_until_accepted(
    daemon: DaemonProcess, alice: Peer
) -> None:
    dm = await _dm_from(alice, daemon)
    await alice.send(dm, "hello from a stranger")

    async def held() -> list[pb.ConversationRequest]:
        # The conversation is recorded when its welcome arrives, its message just after.
        return [
            r
            for r in await _requests(daemon)
            if r.pending_messages and r.peer_inbox_id == alice.inbox_id
        ]

    requests = await until(held)
    assert len(requests) == 1
    req = requests[0]
    assert req.peer_inbox_id == alice.inbox_id
    assert req.peer_address == alice.address
    assert req.conversation_type == pb.CONVERSATION_TYPE_DM
    assert req.pending_messages == 1
    assert "hello" not in str(req)  # identities only, never content
    assert (await daemon.client.receive(wait_ms=0)).messages == []
    with pytest.raises(FailedPrecondition) as err:
        await daemon.client.call(
            "Reply", pb.ReplyRequest(conversation_id=req.conversation_id, text="x", key="k")
        )
    assert err.value.reason == "not_accepted"
    await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=req.conversation_id))
    (msg,) = await receive_n(daemon.client, 1)
    assert msg.text == "hello from a stranger"
    assert msg.sender_inbox_id == alice.inbox_id
    assert msg.conversation_type == pb.CONVERSATION_TYPE_DM
    assert [r for r in await _requests(daemon) if r.peer_inbox_id == alice.inbox_id] == []


async def _accepted_dm(daemon: DaemonProcess, peer: Peer) -> tuple[object, str]:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
    await peer.sync()
    dm = peer.conversation(bytes.fromhex(contact.conversation_id))
    return dm, contact.conversation_id


async def test_consumers_are_independent_and_acks_idempotent(
    daemon: DaemonProcess, alice: Peer
) -> None:
    dm, cid = await _accepted_dm(daemon, alice)
    for i in range(3):
        await alice.send(dm, f"m{i}")
    a = await receive_n(daemon.client, 3, consumer="a", conversation=cid)
    assert [m.text for m in a] == ["m0", "m1", "m2"]
    ids = [m.message_id for m in a]
    assert await daemon.client.ack(ids[:2], consumer="a") == 2
    assert await daemon.client.ack(ids[:2], consumer="a") == 2
    assert _texts_in(cid, await daemon.client.receive(consumer="a", limit=1000)) == ["m2"]
    b = [
        m
        for m in (await daemon.client.receive(consumer="b", limit=1000)).messages
        if m.conversation_id == cid
    ]
    assert [m.text for m in b] == ["m0", "m1", "m2"] and b[0].deliveries == 1
    with pytest.raises(NotFound):
        await daemon.client.ack(["ab" * 16], consumer="a")


async def _taken_in(daemon: DaemonProcess) -> None:
    """Wait until the daemon has taken in the call made before on this connection
    (its handlers start in the order the calls came): it has once a later one is
    answered."""
    await daemon.client.identity()


async def test_a_long_poll_wakes_when_a_message_arrives(daemon: DaemonProcess, alice: Peer) -> None:
    dm, _ = await _accepted_dm(daemon, alice)
    poll = asyncio.create_task(daemon.client.receive(wait_ms=30000))
    await _taken_in(daemon)
    await alice.send(dm, "wake up")
    # Woken by the message: a poll that slept to its deadline would answer empty.
    batch = await poll
    assert [m.text for m in batch.messages] == ["wake up"]


async def test_a_cancelled_receive_leaves_messages_pending(
    daemon: DaemonProcess, alice: Peer
) -> None:
    dm, cid = await _accepted_dm(daemon, alice)
    poll = asyncio.create_task(daemon.client.receive(wait_ms=30000, consumer="c"))
    await _taken_in(daemon)
    poll.cancel()
    await alice.send(dm, "still here")
    (msg,) = await receive_n(daemon.client, 1, consumer="c", conversation=cid)
    assert msg.text == "still here"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_blocked_members_messages_never_appear_in_groups(
    daemon: DaemonProcess, alice: Peer, devnet: str, tmp_path: object
) -> None:
    from pathlib import Path

    mallory = await Peer.create(devnet, Path(str(tmp_path)), "mallory")
    _, mallory_dm = await _accepted_dm(daemon, mallory)
    await daemon.client.call("Block", pb.BlockRequest(conversation_id=mallory_dm))
    ident = await daemon.client.identity()
    group = await alice.client.conversations().create_group(
        [ident.inbox_id, mallory.inbox_id],
        __import__("xmtp_bindings.xmtpv3", fromlist=["x"]).FfiCreateGroupOptions(
            permissions=None, group_name=None, group_image_url_square=None,
            group_description=None, custom_permission_policy_set=None,
            message_disappearing_settings=None, app_data=None,
        ),
    )  # fmt: skip
    group_id = bytes(group.id()).hex()
    ours = {alice.inbox_id, mallory.inbox_id}

    async def requested() -> list[str]:
        return [r.conversation_id for r in await _requests(daemon) if r.peer_inbox_id in ours]

    assert await until(requested) == [group_id]
    await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=group_id))
    await mallory.sync()
    await mallory.send(mallory.conversation(bytes(group.id())), "spam from mallory")
    await alice.send(group, "hello group")
    msgs = await receive_n(daemon.client, 1)
    await daemon.client.call("Sync", pb.SyncRequest())
    msgs = list((await daemon.client.receive()).messages)
    assert [m.text for m in msgs] == ["hello group"]
    assert msgs[0].conversation_type == pb.CONVERSATION_TYPE_GROUP


async def test_connect_rejects_an_address_not_on_xmtp_and_saves_named_contacts(
    daemon: DaemonProcess, alice: Peer
) -> None:
    with pytest.raises(NotFound) as err:
        await daemon.client.call("Connect", pb.ConnectRequest(to="0x" + "12" * 20))
    assert err.value.reason == "not_on_xmtp"
    contact = (
        await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address, name="alice"))
    ).contact
    assert (contact.name, contact.inbox_id, contact.address) == (
        "alice",
        alice.inbox_id,
        alice.address,
    )
    again = (await daemon.client.call("Connect", pb.ConnectRequest(to="alice"))).contact
    assert again.conversation_id == contact.conversation_id


async def test_a_reply_into_a_conversation_unknown_to_the_inbox_is_not_accepted(
    daemon: DaemonProcess,
) -> None:
    with pytest.raises(FailedPrecondition) as err:
        await daemon.client.call(
            "Reply", pb.ReplyRequest(conversation_id="ab" * 16, text="x", key="k")
        )
    assert (err.value.reason, err.value.field) == ("not_accepted", "conversationId")
