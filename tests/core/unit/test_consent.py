"""Consent decisions: what a new conversation starts as, accept, block, unblock, requests,
a blocked inbox inside a group, and XMTP's records from other installations."""

from __future__ import annotations

import pytest

from cone.core.intake.arrivals import initial_consent
from cone.core.service import Core
from cone.engine.port import ConsentUpdate, ConversationInfo, XmtpConsent
from cone.errors import FailedPrecondition
from cone.store import Consent
from support.fake_engine import FakeEngine

from ._reading import consent_of, pending_texts

A, D, U = XmtpConsent.ALLOWED, XmtpConsent.DENIED, XmtpConsent.UNKNOWN


@pytest.mark.parametrize(
    ("is_group", "record", "inbox", "expected"),
    [
        (False, A, U, Consent.ACCEPTED),  # XMTP's record (another installation) wins
        (True, A, U, Consent.ACCEPTED),
        (False, D, U, Consent.BLOCKED),
        (True, D, A, Consent.BLOCKED),
        (False, U, D, Consent.BLOCKED),  # a DM from a denied inbox
        (True, U, D, Consent.BLOCKED),  # a group added by a denied inbox
        (False, U, A, Consent.ACCEPTED),  # a new DM from an allowed inbox
        (True, U, A, Consent.REQUESTED),  # groups are accepted explicitly
        (False, U, U, Consent.REQUESTED),
        (True, U, U, Consent.REQUESTED),
    ],
)
def test_a_new_conversation_starts_from_xmtps_records(
    is_group: bool, record: XmtpConsent, inbox: XmtpConsent, expected: Consent
) -> None:
    info = ConversationInfo("ab" * 16, is_group, "cd" * 32, record)

    assert initial_consent(info, inbox) is expected


@pytest.fixture
async def blocked_in_group(core: Core, engine: FakeEngine) -> tuple[str, str, str, str]:
    """(mallory, trent, dm, group): trent's group with mallory is accepted, the DM with
    mallory blocked."""
    _, mallory = engine.peer("mallory")
    _, trent = engine.peer("trent")
    dm = engine.dm(mallory)
    group = engine.group(trent, [mallory])
    await core.intake.ingestor.ingest([dm, group])
    await core.consents.accept(group)
    await core.consents.block(dm)
    return mallory, trent, dm, group


async def test_a_dm_from_a_stranger_waits_as_a_request_until_accepted(
    core: Core, engine: FakeEngine
) -> None:
    _, stranger = engine.peer("stranger")
    cid = engine.dm(stranger)
    engine.incoming(cid, stranger, "may I?")
    await core.intake.ingestor.ingest([cid])

    assert await pending_texts(core) == []
    [(request, address)] = await core.consents.requests()
    assert (request.conversation_id, request.peer_inbox_id) == (cid, stranger)
    assert address == engine.addresses_by_inbox[stranger][0]

    await core.consents.accept(cid)

    assert await pending_texts(core) == ["may I?"]
    assert await core.consents.requests() == []
    assert engine.conversation_consent[cid] is A
    assert engine.inbox_consent_records[stranger] is A


async def test_blocking_a_dm_denies_its_peer_and_withholds_the_peers_group_messages(
    core: Core, engine: FakeEngine, blocked_in_group: tuple[str, str, str, str]
) -> None:
    mallory, trent, dm, group = blocked_in_group

    engine.incoming(group, mallory, "from the blocked inbox")
    engine.incoming(group, trent, "from a member in good standing")
    await core.intake.ingestor.ingest([group])

    assert await consent_of(core, dm) is Consent.BLOCKED
    assert engine.conversation_consent[dm] is D
    assert engine.inbox_consent_records[mallory] is D
    assert await pending_texts(core) == ["from a member in good standing"]


async def test_unblocking_makes_a_request_again_and_resets_xmtps_records(
    core: Core, engine: FakeEngine, blocked_in_group: tuple[str, str, str, str]
) -> None:
    mallory, _, dm, group = blocked_in_group
    engine.incoming(group, mallory, "said while blocked")
    await core.intake.ingestor.ingest([group])
    assert await pending_texts(core) == []

    await core.consents.unblock(dm)

    assert await consent_of(core, dm) is Consent.REQUESTED
    assert engine.conversation_consent[dm] is U
    assert engine.inbox_consent_records[mallory] is U
    # The inbox is no longer blocked: its group message is delivered.
    assert await pending_texts(core) == ["said while blocked"]


async def test_unblocking_an_accepted_conversation_is_refused(
    core: Core, engine: FakeEngine
) -> None:
    _, peer = engine.peer("peer")
    dm = engine.dm(peer)
    await core.intake.ingestor.ingest([dm])
    await core.consents.accept(dm)

    with pytest.raises(FailedPrecondition) as refused:
        await core.consents.unblock(dm)

    assert refused.value.reason == "not_blocked"


async def test_a_dm_from_an_inbox_allowed_elsewhere_is_accepted_at_once(
    core: Core, engine: FakeEngine
) -> None:
    _, friend = engine.peer("friend")
    engine.inbox_consent_records[friend] = A  # decided on another installation
    dm = engine.dm(friend)
    engine.incoming(dm, friend, "it is me")

    await core.intake.ingestor.ingest([dm])

    assert await consent_of(core, dm) is Consent.ACCEPTED
    assert await pending_texts(core) == ["it is me"]


@pytest.mark.parametrize(("record", "expected"), [(A, Consent.ACCEPTED), (D, Consent.BLOCKED)])
async def test_consent_given_while_a_new_conversation_is_being_recorded_is_not_lost(
    core: Core,
    engine: FakeEngine,
    record: XmtpConsent,
    expected: Consent,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bad order, forced: the read that records the conversation finds it unknown;
    # XMTP's record changes (another installation) and its update reaches cone before
    # the conversation is recorded, so it has nothing to move; then that read's
    # summary is recorded.
    _, peer = engine.peer("peer")
    dm = engine.dm(peer)
    engine.incoming(dm, peer, "hello")
    read = engine.conversation
    reads: list[ConversationInfo | None] = []

    async def read_then_changed(conversation_id: str) -> ConversationInfo | None:
        reads.append(await read(conversation_id))
        if len(reads) == 1:
            engine.conversation_consent[dm] = record
            await core.intake._apply_consent([ConsentUpdate(dm, None, record)])
        return reads[-1]

    monkeypatch.setattr(engine, "conversation", read_then_changed)
    await core.intake.ingestor.ingest([dm])

    first = reads[0]
    assert first is not None and first.consent is U

    assert await consent_of(core, dm) is expected
    assert await pending_texts(core) == (["hello"] if record is A else [])


async def test_consent_from_another_installation_moves_cones_decision(
    core: Core, engine: FakeEngine
) -> None:
    _, peer = engine.peer("peer")
    dm = engine.dm(peer)
    await core.intake.ingestor.ingest([dm])

    await core.intake._apply_consent([ConsentUpdate(dm, None, A)])
    assert await consent_of(core, dm) is Consent.ACCEPTED
    await core.intake._apply_consent([ConsentUpdate(dm, None, U), ConsentUpdate(None, peer, D)])
    assert (
        await consent_of(core, dm) is Consent.ACCEPTED
    )  # unknown and inbox records change nothing
    await core.intake._apply_consent([ConsentUpdate(dm, None, D)])
    assert await consent_of(core, dm) is Consent.BLOCKED


async def test_a_late_echo_of_an_own_allow_does_not_undo_a_block(
    core: Core, engine: FakeEngine
) -> None:
    _, stranger = engine.peer("stranger")
    cid = engine.dm(stranger)
    engine.incoming(cid, stranger, "hello")
    await core.intake.ingestor.ingest([cid])
    await core.consents.accept(cid)
    await core.consents.block(cid)

    # The consent stream hands back the accept's record after the block (the timing
    # a busy machine gives): it is this installation's own, and no news.
    await core.intake._apply_consent([ConsentUpdate(cid, None, A, own=True)])
    assert await consent_of(core, cid) is Consent.BLOCKED

    # The same record from another installation is a decision taken there.
    await core.intake._apply_consent([ConsentUpdate(cid, None, A)])
    assert await consent_of(core, cid) is Consent.ACCEPTED
