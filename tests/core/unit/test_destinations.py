"""The one destination resolver, in memory: a contact name wins over looking like hex;
a known address resolves with the network down; malformed input and oneself are
invalid. (The same against the devnet: tests/core/test_destinations.py.)"""

from __future__ import annotations

import pytest

from cone.core.content import Outgoing
from cone.core.service import Core
from cone.errors import InvalidArgument, NotFound, Unavailable
from cone.store import Consent, Kind, conversations
from support.fake_engine import FakeEngine

HI = Outgoing(text="hi")


@pytest.mark.parametrize("name", ["cafe", "Dee", "ada", "beef01"])
async def test_a_contact_name_that_looks_like_hex_routes_to_the_contact(
    core: Core, engine: FakeEngine, name: str
) -> None:
    address, _ = engine.peer("alice")
    contact = await core.consents.connect(address, name)

    sent = await core.sending.send(to=name, content=HI, key="k", reply_to=None)

    assert sent.conversation_id == contact.conversation_id


async def test_known_addresses_resolve_with_the_network_down_and_unknown_ones_do_not(
    core: Core, engine: FakeEngine
) -> None:
    contact_address, _ = engine.peer("alice")
    contact = await core.consents.connect(contact_address, None)
    peer_address, peer_inbox = engine.peer("bob")  # wrote first, accepted, no contact
    bob_dm = engine.dm(peer_inbox)
    await core.store.write(conversations.ensure, bob_dm, Kind.DM, peer_inbox, Consent.ACCEPTED, 1)
    stranger, _ = engine.peer("carol")
    engine.online = False  # resolving an address would fail
    engine.fail_publish = [Unavailable("publishing failed: the node is down")] * 2

    to_contact = await core.sending.send(to=contact_address, content=HI, key="a", reply_to=None)
    to_peer = await core.sending.send(
        to=peer_address.upper().replace("0X", "0x"), content=HI, key="b", reply_to=None
    )

    assert (to_contact.conversation_id, to_contact.published) == (contact.conversation_id, False)
    assert (to_peer.conversation_id, to_peer.published) == (bob_dm, False)
    assert sorted(o.key for o in await core.outbox.unsettled()) == ["a", "b"]
    with pytest.raises(Unavailable):
        await core.sending.send(to=stranger, content=HI, key="c", reply_to=None)


@pytest.mark.parametrize("to", ["0x123", "two words", "0x" + "ab" * 21, "-dash"])
async def test_input_that_is_no_destination_is_invalid(core: Core, to: str) -> None:
    with pytest.raises(InvalidArgument) as invalid:
        await core.sending.send(to=to, content=HI, key="k", reply_to=None)

    assert (invalid.value.reason, invalid.value.field) == ("not_a_destination", "to")


async def test_oneself_is_refused_by_send_and_connect(core: Core, engine: FakeEngine) -> None:
    for own in (engine.address, engine.inbox_id):
        with pytest.raises(InvalidArgument) as sent:
            await core.sending.send(to=own, content=HI, key="k", reply_to=None)
        with pytest.raises(InvalidArgument) as connected:
            await core.consents.connect(own, None)
        assert (sent.value.reason, connected.value.reason) == ("own_inbox", "own_inbox")
    assert engine.held == {}


async def test_connect_refuses_a_conversation_id(core: Core, engine: FakeEngine) -> None:
    _, inbox_id = engine.peer("dave")
    cid = engine.dm(inbox_id)
    await core.store.write(conversations.ensure, cid, Kind.DM, inbox_id, Consent.ACCEPTED, 1)

    with pytest.raises(NotFound) as refused:
        await core.consents.connect(cid, None)

    assert refused.value.reason == "unknown_destination"


@pytest.mark.parametrize("spelling", ["address", "inbox id", "name"])
async def test_a_send_to_a_dm_sent_to_before_neither_resolves_nor_asks_libxmtp(
    core: Core, engine: FakeEngine, spelling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    address, inbox_id = engine.peer("alice")
    to = {"address": address.upper().replace("0X", "0x"), "inbox id": inbox_id, "name": "al"}[
        spelling
    ]
    if spelling == "name":
        await core.consents.connect(address, "al")
    first = await core.sending.send(to=to, content=HI, key="first", reply_to=None)

    async def not_asked(*args: object) -> None:
        raise AssertionError("resolved again")

    for name in ("resolve", "find_or_create_dm", "addresses_of", "conversation"):
        monkeypatch.setattr(engine, name, not_asked)
    monkeypatch.setattr(engine.groups, "addresses", not_asked)
    read = core.store.read

    async def no_contact_read(fn: object, *args: object) -> object:
        assert fn not in (conversations.contact_by_name, conversations.contact_names), "resolved"
        return await read(fn, *args)  # type: ignore[arg-type]  # the store's own signature

    monkeypatch.setattr(core.store, "read", no_contact_read)
    again = await core.sending.send(to=to, content=HI, key="again", reply_to=None)

    assert again.conversation_id == first.conversation_id and again.published


async def test_a_remembered_dm_blocked_since_is_resolved_again_and_accepted_by_the_send(
    core: Core, engine: FakeEngine
) -> None:
    address, _ = engine.peer("alice")
    first = await core.sending.send(to=address, content=HI, key="first", reply_to=None)
    await core.consents.block(first.conversation_id)

    again = await core.sending.send(to=address, content=HI, key="again", reply_to=None)

    assert again.conversation_id == first.conversation_id and again.published
    conv = await core.store.read(conversations.get, first.conversation_id)
    assert conv is not None and conv.consent is Consent.ACCEPTED


async def test_saving_a_contact_makes_a_name_lead_to_its_new_inbox(
    core: Core, engine: FakeEngine
) -> None:
    alice_address, _ = engine.peer("alice")
    bob_address, _ = engine.peer("bob")
    to_alice = await core.consents.connect(alice_address, "friend")
    assert (
        await core.sending.send(to="friend", content=HI, key="a", reply_to=None)
    ).conversation_id == (to_alice.conversation_id)
    await core.consents.connect(alice_address, "alice")  # the name moves away from alice...
    to_bob = await core.consents.connect(bob_address, "friend")  # ...and to bob

    sent = await core.sending.send(to="friend", content=HI, key="b", reply_to=None)

    assert sent.conversation_id == to_bob.conversation_id != to_alice.conversation_id
