"""Resolve: which conversation a contact name, inbox id, address or conversation id
names, read from the store (and libxmtp's addresses) without making or accepting one."""

from __future__ import annotations

import pytest

from cone.core.service import Core
from cone.errors import InvalidArgument, NotFound
from cone.store import Consent, conversations
from support.fake_engine import FakeEngine


async def test_a_contact_name_an_inbox_id_and_an_address_name_the_direct_conversation(
    core: Core, engine: FakeEngine
) -> None:
    address, inbox_id = engine.peer("alice")
    contact = await core.consents.connect(address, "alice")

    for named in ("alice", inbox_id, address, address.upper().replace("0X", "0x")):
        assert await core.history.resolve(named) == contact.conversation_id, named


async def test_a_request_is_found_by_its_peer_without_being_accepted(
    core: Core, engine: FakeEngine
) -> None:
    address, inbox_id = engine.peer("bob")
    dm = engine.dm(inbox_id)
    await core.intake.ingestor.ingest([dm])

    assert await core.history.resolve(address) == dm
    assert await core.history.resolve(inbox_id) == dm
    conv = await core.store.read(conversations.get, dm)
    assert conv is not None and conv.consent is Consent.REQUESTED


async def test_a_conversation_id_comes_back_as_given_and_nothing_is_started(
    core: Core, engine: FakeEngine
) -> None:
    address, _ = engine.peer("carol")

    assert await core.history.resolve("AB" * 16) == "ab" * 16
    with pytest.raises(NotFound, match=f"no conversation with {address} is known") as found:
        await core.history.resolve(address)
    assert found.value.reason == "unknown_destination"
    with pytest.raises(NotFound, match="no contact is saved as 'dora'"):
        await core.history.resolve("dora")
    with pytest.raises(InvalidArgument) as malformed:
        await core.history.resolve("no such")
    assert malformed.value.reason == "not_a_destination"
    assert await core.store.read(conversations.all_conversations) == []
