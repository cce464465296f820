"""Where a send goes: an address, an inbox id, a contact name or a conversation id."""

from __future__ import annotations

import pytest

from cone.core.content import Outgoing
from cone.core.service import Core
from cone.engine.port import XmtpConsent
from cone.errors import FailedPrecondition, NotFound
from cone.store import Consent, Kind, conversations
from support.fake_engine import FakeEngine, conversation_id

from ._reading import consent_of

HI = Outgoing(text="hi")


async def test_an_address_routes_to_the_dm_with_its_inbox_and_accepts_it(
    core: Core, engine: FakeEngine
) -> None:
    address, inbox_id = engine.peer("alice")

    sent = await core.sending.send(
        to="0x" + address[2:].upper(), content=HI, key="k", reply_to=None
    )

    assert sent.conversation_id == engine.dm_id(inbox_id)
    assert sent.published and engine.published == [sent.message_id]
    assert await consent_of(core, sent.conversation_id) is Consent.ACCEPTED


async def test_sending_to_a_peer_whose_dm_is_a_request_accepts_it_in_xmtp_too(
    core: Core, engine: FakeEngine
) -> None:
    address, inbox_id = engine.peer("alice")
    cid = engine.dm(inbox_id)
    engine.incoming(cid, inbox_id, "hello?")
    await core.intake.ingestor.ingest([cid])
    assert await consent_of(core, cid) is Consent.REQUESTED

    sent = await core.sending.send(to=address, content=HI, key="k", reply_to=None)

    assert sent.conversation_id == cid
    assert await consent_of(core, cid) is Consent.ACCEPTED
    assert engine.conversation_consent[cid] is XmtpConsent.ALLOWED
    assert engine.inbox_consent_records[inbox_id] is XmtpConsent.ALLOWED


async def test_an_inbox_id_routes_to_the_dm_with_that_inbox(core: Core, engine: FakeEngine) -> None:
    _, inbox_id = engine.peer("bob")

    sent = await core.sending.send(to=inbox_id, content=HI, key="k", reply_to=None)

    assert sent.conversation_id == engine.dm_id(inbox_id)


async def test_a_contact_name_routes_to_the_contacts_dm(core: Core, engine: FakeEngine) -> None:
    address, inbox_id = engine.peer("carol")
    contact = await core.consents.connect(address, "carol")

    sent = await core.sending.send(to="carol", content=HI, key="k", reply_to=None)

    assert contact.inbox_id == inbox_id and contact.address == address
    assert sent.conversation_id == contact.conversation_id == engine.dm_id(inbox_id)


async def test_a_conversation_id_routes_into_that_accepted_conversation(
    core: Core, engine: FakeEngine
) -> None:
    _, inbox_id = engine.peer("dave")
    cid = engine.dm(inbox_id)
    await core.store.write(conversations.ensure, cid, Kind.DM, inbox_id, Consent.ACCEPTED, 1)

    sent = await core.sending.send(to=cid, content=HI, key="k", reply_to=None)

    assert sent.conversation_id == cid and sent.published


async def test_a_conversation_id_of_a_request_is_refused_and_not_accepted_by_sending(
    core: Core, engine: FakeEngine
) -> None:
    _, inbox_id = engine.peer("erin")
    cid = engine.dm(inbox_id)  # libxmtp holds it; cone has not recorded it yet

    with pytest.raises(FailedPrecondition) as refused:
        await core.sending.send(to=cid, content=HI, key="k", reply_to=None)

    assert refused.value.reason == "not_accepted"
    assert await consent_of(core, cid) is Consent.REQUESTED
    assert engine.prepared == []


async def test_an_unknown_conversation_id_is_not_found(core: Core, engine: FakeEngine) -> None:
    with pytest.raises(NotFound) as missing:
        await core.sending.send(to=conversation_id("nowhere"), content=HI, key="k", reply_to=None)

    assert missing.value.reason == "unknown_conversation"


async def test_an_address_not_on_xmtp_is_not_found(core: Core, engine: FakeEngine) -> None:
    with pytest.raises(NotFound) as missing:
        await core.sending.send(to="0x" + "1" * 40, content=HI, key="k", reply_to=None)

    assert missing.value.reason == "not_on_xmtp"
    assert engine.held == {}


async def test_a_name_that_is_no_contact_is_an_unknown_destination(core: Core) -> None:
    with pytest.raises(NotFound) as missing:
        await core.sending.send(to="nobody", content=HI, key="k", reply_to=None)

    assert missing.value.reason == "unknown_destination"


async def test_a_reply_never_goes_into_a_conversation_cone_has_not_recorded(
    core: Core, engine: FakeEngine
) -> None:
    with pytest.raises(FailedPrecondition) as refused:
        await core.sending.reply(conversation_id=conversation_id("nowhere"), key="k", content=HI)

    assert refused.value.reason == "not_accepted"
