"""One destination resolver for send, connect and group members: a saved contact name
wins over looking like hex, then conversation id, inbox id, address; an address cone
already knows resolves without the network, so a send to it queues while the node is
down."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cone.errors import InvalidArgument, NotFound, Unavailable
from conepb.v1 import cone_pb2 as pb
from support.cli import cone_cli
from support.daemons import DaemonProcess
from support.devnet_process import DevnetProcess
from support.peers import Peer
from support.waiting import accept_request, until


async def _send(daemon: DaemonProcess, to: str, text: str, key: str) -> pb.SendResponse:
    return await daemon.client.call("Send", pb.SendRequest(to=to, text=text, key=key))


async def _connect(daemon: DaemonProcess, to: str, name: str | None = None) -> pb.Contact:
    request = pb.ConnectRequest(to=to, name=name) if name else pb.ConnectRequest(to=to)
    return (await daemon.client.call("Connect", request)).contact


async def _texts(peer: Peer, conversation_id: str) -> list[str]:
    await peer.client.conversations().sync()  # welcomes: a DM cone made may be new here
    return list(await peer.texts(bytes.fromhex(conversation_id)))


async def test_a_contact_name_that_looks_like_hex_routes_to_the_contact(
    daemon: DaemonProcess, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    carol = await Peer.create(devnet, tmp_path, "carol")
    contacts = {
        "cafe": await _connect(daemon, alice.address, "cafe"),
        "Dee": await _connect(daemon, bob.address, "Dee"),
        "ada": await _connect(daemon, carol.inbox_id, "ada"),
    }
    for name, contact in contacts.items():
        sent = await _send(daemon, name, f"to {name}", f"k-{name}")
        assert sent.published and sent.conversation_id == contact.conversation_id, name

    # The other readings keep their places: a conversation id, an inbox id, an address.
    cid = contacts["cafe"].conversation_id
    assert (await _send(daemon, cid, "by id", "k-id")).conversation_id == cid
    by_inbox = await _send(daemon, bob.inbox_id, "by inbox", "k-inbox")
    assert by_inbox.conversation_id == contacts["Dee"].conversation_id
    by_address = await _send(daemon, carol.address.upper().replace("0X", "0x"), "hi", "k-addr")
    assert by_address.conversation_id == contacts["ada"].conversation_id

    # The CLI's send takes the same path: a hex-looking name, and malformed input
    # exits 2 (invalid), not 3 (not found).
    home = ["--home", str(daemon.home)]
    by_cli = await cone_cli(["send", "Dee", "from the shell", "--key", "k-cli", *home, "--json"])
    assert by_cli.code == 0, by_cli.err
    assert by_cli.json()["conversationId"] == contacts["Dee"].conversation_id
    malformed = await cone_cli(["send", "0x123", "hi", *home])
    assert malformed.code == 2, malformed.err

    async def alice_has_both() -> list[str]:
        got = await _texts(alice, cid)
        return got if {"to cafe", "by id"} <= set(got) else []

    await until(alice_has_both)

    # A hex-looking name nobody saved is a conversation id, which this inbox does not know.
    with pytest.raises(NotFound) as unknown:
        await _send(daemon, "beef", "x", "k-beef")
    assert unknown.value.reason == "unknown_conversation"
    # Connect takes no conversation id; a string that is none of the four is named.
    with pytest.raises(NotFound) as refused:
        await _connect(daemon, cid)
    assert refused.value.reason == "unknown_destination" and "conversation id" in str(
        refused.value.message
    )
    with pytest.raises(NotFound) as nobody:
        await _send(daemon, "bob", "x", "k-bob")  # a name no contact has
    assert nobody.value.reason == "unknown_destination"
    # Input that is none of the four is invalid (exit 2 in the CLI), not unknown.
    for malformed in ("0x123", "no such name", "0x" + "ab" * 21):
        with pytest.raises(InvalidArgument) as invalid:
            await _send(daemon, malformed, "x", "k-bad")
        assert (invalid.value.reason, invalid.value.field) == ("not_a_destination", "to")
    # Oneself is refused rather than made a self-DM, by address or inbox id.
    me = await daemon.client.identity()
    for own in (me.address, me.inbox_id):
        with pytest.raises(InvalidArgument) as self_dm:
            await _send(daemon, own, "x", "k-self")
        assert self_dm.value.reason == "own_inbox"
        with pytest.raises(InvalidArgument):
            await _connect(daemon, own)


async def test_a_send_to_a_known_address_queues_while_the_node_is_down(
    home: Path, tmp_path: Path
) -> None:
    db = str(tmp_path / "devnet.db")
    node = await DevnetProcess.start(tmp_path, "--db", db)
    try:
        alice = await Peer.create(node.url, tmp_path, "alice")
        bob = await Peer.create(node.url, tmp_path, "bob")
        carol = await Peer.create(node.url, tmp_path, "carol")
        async with DaemonProcess(home, node.url) as daemon:
            # alice is a saved contact (by address); bob only wrote first and was
            # accepted: his address is known to libxmtp's local state, not to a contact.
            to_alice = await _connect(daemon, alice.address)
            bob_dm = await daemon.dm_from(bob)
            await bob.send(bob_dm, "hello from bob")
            bob_cid = bytes(bob_dm.id()).hex()

            await accept_request(daemon.client, bob_cid)
            assert await node.stop() == 0

            async def to_a_stranger() -> None:
                # An address cone has never met still needs the network: said, not queued.
                with pytest.raises(Unavailable):
                    await _send(daemon, carol.address, "to a stranger", "o-c")

            # Side by side: each waits out libxmtp's own retries against the stopped node.
            offline_alice, offline_bob, _ = await asyncio.gather(
                _send(daemon, alice.address, "offline to alice", "o-a"),
                _send(daemon, bob.address, "offline to bob", "o-b"),
                to_a_stranger(),
            )
            assert (offline_alice.published, offline_bob.published) == (False, False)
            assert offline_alice.conversation_id == to_alice.conversation_id
            assert offline_bob.conversation_id == bob_cid
            status = await daemon.client.call("Status", pb.StatusRequest())
            assert sorted(o.key for o in status.outbox) == ["o-a", "o-b"]  # not "o-c"

            node = await DevnetProcess.start(tmp_path, "--db", db, "--port", str(node.port))

            async def delivered() -> bool:
                s = await daemon.client.call("Status", pb.StatusRequest())
                return not s.outbox

            await until(delivered)

            async def got(peer: Peer, conversation_id: str, text: str) -> bool:
                return text in await _texts(peer, conversation_id)

            await until(lambda: got(alice, to_alice.conversation_id, "offline to alice"))
            await until(lambda: got(bob, bob_cid, "offline to bob"))
    finally:
        if node.process.returncode is None:
            await node.stop()
