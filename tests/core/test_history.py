"""Conversations, history, contacts and unblock against a real daemon and raw libxmtp peers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.errors import FailedPrecondition, NotFound
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.state import open_xmtp
from support.waiting import receive_n, until


async def _daemon_id(daemon: DaemonProcess) -> Any:
    ident = await daemon.client.identity()
    return ffi.FfiIdentifier(
        identifier=ident.address, identifier_kind=ffi.FfiIdentifierKind.ETHEREUM
    )


async def _dm_to_daemon(peer: Peer, daemon: DaemonProcess, ident: Any = None) -> Any:
    """A DM from `peer` to the daemon (`ident`: its identifier, when it is stopped)."""
    opts = ffi.FfiCreateDmOptions(message_disappearing_settings=None)
    return await peer.client.conversations().find_or_create_dm_by_identity(
        ident or await _daemon_id(daemon), opts
    )


async def _group_with_daemon(
    peer: Peer, daemon: DaemonProcess, *others: Peer, name: str, ident: Any = None
) -> Any:
    opts = ffi.FfiCreateGroupOptions(
        permissions=None, group_name=name, group_image_url_square=None,
        group_description=f"about {name}", custom_permission_policy_set=None,
        message_disappearing_settings=None, app_data=None,
    )  # fmt: skip
    ids = [ident or await _daemon_id(daemon), *(o.identifier() for o in others)]
    return await peer.client.conversations().create_group_by_identity(ids, opts)


async def _connect(daemon: DaemonProcess, peer: Peer, name: str | None = None) -> tuple[Any, str]:
    request = (
        pb.ConnectRequest(to=peer.address, name=name)
        if name
        else pb.ConnectRequest(to=peer.address)
    )
    contact = (await daemon.client.call("Connect", request)).contact
    await peer.client.conversations().sync()
    return peer.conversation(bytes.fromhex(contact.conversation_id)), contact.conversation_id


async def _conversations(daemon: DaemonProcess, **kw: Any) -> pb.ConversationsResponse:
    return await daemon.client.call("Conversations", pb.ConversationsRequest(**kw))


async def _history(daemon: DaemonProcess, conversation_id: str, **kw: Any) -> pb.MessagesResponse:
    return await daemon.client.call(
        "Messages", pb.MessagesRequest(conversation_id=conversation_id, **kw)
    )


async def test_conversations_lists_dms_groups_and_requests_with_filters_and_pages(
    daemon: DaemonProcess, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    carol = await Peer.create(devnet, tmp_path, "carol")
    alice_dm, alice_cid = await _connect(daemon, alice, "alice")
    await alice.send(alice_dm, "one")
    await alice.send(alice_dm, "two")
    # The timing that once broke the order: two conversations made while the daemon
    # is down reach its libxmtp and cone's store in one batch at its next start, so
    # libxmtp's creation times and cone's first-seen times need not agree. The list's
    # order and its createdAt are both cone's first-seen time, whatever the batch did.
    me = await _daemon_id(daemon)
    await daemon.stop()
    stranger = await _dm_to_daemon(bob, daemon, me)
    await bob.send(stranger, "hello?")
    group = await _group_with_daemon(carol, daemon, alice, name="team", ident=me)
    await carol.send(group, "welcome")
    group_id = bytes(group.id()).hex()
    await daemon.restart()

    async def three() -> list[pb.ConversationSummary]:
        found = list((await _conversations(daemon)).conversations)
        return found if len(found) == 3 else []

    found = {c.conversation_id: c for c in await until(three)}
    dm = found[alice_cid]
    assert dm.conversation_type == pb.CONVERSATION_TYPE_DM
    assert dm.consent == pb.CONSENT_STATE_ACCEPTED
    assert dm.peer_inbox_id == alice.inbox_id and dm.peer_address == alice.address
    assert dm.contact_name == "alice" and dm.active
    assert not dm.HasField("name") and not dm.HasField("member_count")
    g = found[group_id]
    assert g.conversation_type == pb.CONVERSATION_TYPE_GROUP
    assert g.consent == pb.CONSENT_STATE_REQUESTED  # groups are accepted explicitly
    assert (g.name, g.description, g.member_count) == ("team", "about team", 3)
    assert g.peer_inbox_id == carol.inbox_id and g.pending_messages == 0
    request = found[bytes(stranger.id()).hex()]
    assert request.consent == pb.CONSENT_STATE_REQUESTED and request.peer_inbox_id == bob.inbox_id

    accepted = (await _conversations(daemon, consent=pb.CONSENT_STATE_ACCEPTED)).conversations
    assert [c.conversation_id for c in accepted] == [alice_cid]
    groups = (await _conversations(daemon, type=pb.CONVERSATION_TYPE_GROUP)).conversations
    assert [c.conversation_id for c in groups] == [group_id]

    # Pending counts follow the consumer's receipts, and history reading changes none.
    await until(lambda: _pending(daemon, alice_cid, 2))
    (first, _second) = await receive_n(daemon.client, 2, consumer="c1")
    await daemon.client.ack([first.message_id], consumer="c1")
    page = await _conversations(daemon, consumer="c1", consent=pb.CONSENT_STATE_ACCEPTED)
    assert page.conversations[0].pending_messages == 1
    assert page.conversations[0].HasField("last_message_at")

    # Pages of one, newest first, each conversation exactly once.
    seen: list[pb.ConversationSummary] = []
    cursor = None
    while True:
        kw: dict[str, Any] = {"limit": 1} | ({"cursor": cursor} if cursor else {})
        page = await _conversations(daemon, **kw)
        seen += page.conversations
        if not page.HasField("cursor"):
            break
        cursor = page.cursor
    assert sorted(c.conversation_id for c in seen) == sorted(found)
    created = [(c.created_at.ToNanoseconds(), c.conversation_id) for c in seen]
    assert len(seen) == 3
    assert created == sorted(created, reverse=True)  # newest first, then id descending
    assert created[-1][1] == alice_cid  # seen before the daemon stopped


async def _pending(daemon: DaemonProcess, cid: str, n: int) -> bool:
    for c in (await _conversations(daemon)).conversations:
        if c.conversation_id == cid:
            return c.pending_messages == n
    return False


async def test_history_merges_own_messages_and_changes_no_receipt(
    daemon: DaemonProcess, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    dm, cid = await _connect(daemon, alice)
    await alice.send(dm, "a1")
    await alice.send(dm, "a2")
    sent = await daemon.client.call("Send", pb.SendRequest(to=cid, text="o1", key="k-o1"))
    await alice.send(dm, "a3")

    async def four() -> list[pb.Message]:
        found = list((await _history(daemon, cid)).messages)
        return found if len(found) == 4 else []

    newest_first = await until(four)
    assert [m.text for m in newest_first] == ["a3", "o1", "a2", "a1"]
    own = newest_first[1]
    assert own.own and own.message_id == sent.message_id
    assert own.sender_inbox_id == (await daemon.client.identity()).inbox_id
    assert not any(m.HasField("own") for m in newest_first if m.text != "o1")
    assert all(m.conversation_type == pb.CONVERSATION_TYPE_DM for m in newest_first)

    # Reading history handed nothing out: a first receive sees deliveries == 1.
    got = await receive_n(daemon.client, 3)
    assert [m.text for m in got] == ["a1", "a2", "a3"] and {m.deliveries for m in got} == {1}
    await daemon.client.ack([m.message_id for m in got])
    # Acknowledged messages stay in history.
    assert [m.text for m in (await _history(daemon, cid, oldest_first=True)).messages] == [
        "a1", "a2", "o1", "a3",
    ]  # fmt: skip

    a1 = newest_first[3].message_id
    after = await _history(daemon, cid, after=a1, limit=2)
    assert [m.text for m in after.messages] == ["a2", "o1"] and after.more
    before = await _history(daemon, cid, before=newest_first[0].message_id, limit=5)
    assert [m.text for m in before.messages] == ["o1", "a2", "a1"] and not before.more

    with pytest.raises(NotFound) as err:
        await _history(daemon, cid, before="ab" * 32)
    assert err.value.reason == "unknown_message"
    with pytest.raises(NotFound) as err:
        await _history(daemon, "cd" * 16)
    assert err.value.reason == "unknown_conversation"

    bob = await Peer.create(devnet, tmp_path, "bob")
    stranger = await _dm_to_daemon(bob, daemon)
    await bob.send(stranger, "let me in")
    stranger_id = bytes(stranger.id()).hex()

    async def recorded() -> bool:
        return any(
            c.conversation_id == stranger_id for c in (await _conversations(daemon)).conversations
        )

    await until(recorded)
    with pytest.raises(FailedPrecondition) as refused:
        await _history(daemon, stranger_id)
    assert refused.value.reason == "not_accepted"  # a request's content stays hidden


async def test_history_pages_through_1000_messages_both_ways_without_gap_or_repeat(
    daemon: DaemonProcess, alice: Peer
) -> None:
    dm, cid = await _connect(daemon, alice)
    expected = 1000
    for i in range(expected):
        if i % 40 == 39:
            await daemon.client.call("Send", pb.SendRequest(to=cid, text=f"own {i}", key=f"k{i}"))
        else:
            await alice.send(dm, f"peer {i}")

    async def complete() -> bool:
        newest = await _history(daemon, cid, limit=1000)
        return len(newest.messages) == expected

    await until(complete, timeout=120)

    async def walk(oldest_first: bool) -> list[str]:
        ids: list[str] = []
        cursor: str | None = None
        while True:
            kw: dict[str, Any] = {"limit": 37, "oldest_first": oldest_first}
            if cursor is not None:
                kw["after" if oldest_first else "before"] = cursor
            page = await _history(daemon, cid, **kw)
            ids += [m.message_id for m in page.messages]
            if not page.more:
                assert len(page.messages) <= 37
                return ids
            cursor = page.messages[-1].message_id

    forward = await walk(True)
    backward = await walk(False)
    assert len(forward) == expected and len(set(forward)) == expected
    assert backward == forward[::-1]
    texts = [m.text for m in (await _history(daemon, cid, limit=1000, oldest_first=True)).messages]
    assert sum(t.startswith("own ") for t in texts) == expected // 40


async def test_contacts_and_unblock_back_to_a_request_mirrored_to_xmtp(
    daemon: DaemonProcess, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    dm, cid = await _connect(daemon, alice, "alice")
    await _connect(daemon, bob)
    contacts = (await daemon.client.call("Contacts", pb.ContactsRequest())).contacts
    assert [(c.name or None, c.inbox_id) for c in contacts] == [
        ("alice", alice.inbox_id),
        (None, bob.inbox_id),
    ]
    assert contacts[0].address == alice.address and contacts[0].conversation_id == cid

    with pytest.raises(FailedPrecondition) as err:
        await daemon.client.call("Unblock", pb.UnblockRequest(conversation_id=cid))
    assert err.value.reason == "not_blocked"
    await daemon.client.call("Block", pb.BlockRequest(conversation_id=cid))
    await alice.send(dm, "while blocked")
    await daemon.client.call("Unblock", pb.UnblockRequest(conversation_id=cid))
    requests = (await daemon.client.call("Requests", pb.RequestsRequest())).requests

    async def held() -> list[pb.ConversationRequest]:
        found = (await daemon.client.call("Requests", pb.RequestsRequest())).requests
        return [r for r in found if r.conversation_id == cid and r.pending_messages]

    requests = await until(held)
    assert requests[0].peer_inbox_id == alice.inbox_id
    assert (await daemon.client.receive(wait_ms=0)).messages == []  # not silently accepted
    await daemon.client.call("Unblock", pb.UnblockRequest(conversation_id=cid))  # a no-op

    # XMTP's own records went back to unknown, for the conversation and the peer.
    await daemon.stop()
    client = await open_xmtp(daemon.home, devnet)
    try:
        assert (
            client.conversation(bytes.fromhex(cid)).consent_state() == ffi.FfiConsentState.UNKNOWN
        )
        inbox_state = await client.get_consent_state(
            ffi.FfiConsentEntityType.INBOX_ID, alice.inbox_id
        )
        assert inbox_state == ffi.FfiConsentState.UNKNOWN
    finally:
        client.release_db_connection()
    await daemon.restart()
    assert [r.conversation_id for r in await until(held)] == [cid]  # still a request
    await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=cid))
    (msg,) = await receive_n(daemon.client, 1)
    assert msg.text == "while blocked"
