"""The engine's role fakes (cone/engine/roles/) behave as their docstrings say: the
logic they encode (paging, offline lookups, consent records, group roles, revocation,
a node's answer, a missing file) is what the core's unit tests lean on."""

from __future__ import annotations

import pytest

from cone.engine.roles.attachments import DownloadError, MemoryFetching
from cone.engine.roles.consent import MemoryConsents
from cone.engine.roles.database import MemoryDatabase
from cone.engine.roles.directory import MemoryDirectory
from cone.engine.roles.groups import MemoryGroups, MemoryInstallations
from cone.engine.roles.memory import MemoryXmtp
from cone.engine.roles.probe import MemoryNode, NodeAnswer, NodeView
from cone.engine.roles.reads import MemoryReads
from cone.engine.roles.streams import MemoryStreams
from cone.engine.roles.sync import MemorySync
from cone.engine.values import Role, XmtpConsent
from cone.errors import NotFound, Unavailable


async def test_reads_page_by_two_each_message_once_and_an_empty_read_is_one_empty_page() -> None:
    x = MemoryReads()
    _, alice = x.peer("alice")
    cid = x.dm(alice)
    assert [p async for p in x.message_pages(cid, 0)] == [[]]
    sent = [x.store(cid, alice, bytes([i])) for i in range(5)]
    pages = [p async for p in x.message_pages(cid, 0)]
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [m for p in pages for m in p] == sent
    assert await x.messages_since(cid, sent[2].inserted_at_ns) == sent[3:]
    assert await x.message_count(cid) == 5


async def test_reads_list_each_conversation_with_its_newest_message_and_count_listings() -> None:
    x = MemoryReads()
    _, alice = x.peer("alice")
    _, bob = x.peer("bob")
    quiet, busy = x.dm(alice), x.dm(bob)
    x.store(busy, bob, b"a")
    newest = x.store(busy, bob, b"b")
    listed = {c.id: c.last_message_id for c in await x.conversations()}
    assert listed == {quiet: "", busy: newest.id}
    assert x.listings == 1


async def test_reads_own_messages_are_this_identitys_application_messages() -> None:
    x = MemoryReads()
    _, alice = x.peer("alice")
    cid = x.group(alice, [])
    mine = x.store(cid, x.inbox_id, b"mine")
    x.store(cid, alice, b"theirs")
    x.group_update(cid, x.inbox_id, name="renamed")
    assert await x.own_messages(cid, 0) == [mine]
    assert x.held[cid].name == "renamed"


async def test_reads_newest_stamps_are_each_conversations_newest_or_none_when_unreadable() -> None:
    x = MemoryReads()
    _, alice = x.peer("alice")
    empty, used = x.dm(alice), x.group(alice, [])
    m = x.store(used, alice, b"x")
    stamps = await x.newest_stamps()
    assert stamps is not None and stamps.newest == {empty: 0, used: m.inserted_at_ns}
    assert stamps.nothing_after(used, m.inserted_at_ns)
    x.stamps_readable = False
    assert await x.newest_stamps() is None
    assert x.stamp_reads == 2


async def test_consent_records_a_conversation_and_its_peer_and_reads_show_it() -> None:
    class Both(MemoryReads, MemoryConsents):
        pass

    x = Both()
    _, alice = x.peer("alice")
    cid = x.dm(alice)
    await x.set_consent(conversation_id=cid, allowed=True, peer_inbox_id=alice)
    info = await x.conversation(cid)
    assert info is not None and info.consent is XmtpConsent.ALLOWED
    assert await x.inbox_consent(alice) is XmtpConsent.ALLOWED
    await x.reset_consent(conversation_id=cid, peer_inbox_id=None)
    assert x.conversation_consent[cid] is XmtpConsent.UNKNOWN
    assert await x.inbox_consent(alice) is XmtpConsent.ALLOWED  # no peer given: kept


async def test_directory_resolves_known_inboxes_offline_but_not_addresses_or_new_dms() -> None:
    x = MemoryDirectory()
    address, alice = x.peer("alice")
    _, bob = x.peer("bob")
    assert await x.resolve(address) == alice
    assert await x.resolve("0x" + "0" * 40) is None
    x.online = False
    assert await x.resolve(alice) == alice  # libxmtp's local record answers
    with pytest.raises(Unavailable):
        await x.resolve(address)
    with pytest.raises(Unavailable):
        await x.find_or_create_dm(bob)
    x.online = True
    dm = await x.find_or_create_dm(bob)
    assert dm.id == x.dm_id(bob) and dm.peer_inbox_id == bob and not dm.is_group
    assert await x.addresses_of(alice) == [address]


async def test_sync_fails_with_sync_failed_while_offline() -> None:
    x = MemorySync()
    assert await x.sync_all() is None
    x.online = False
    with pytest.raises(Unavailable) as failed:
        await x.sync_all()
    assert failed.value.reason == "sync_failed"
    with pytest.raises(Unavailable):
        await x.sync_conversation("00" * 16)


async def test_streams_keep_their_handlers_and_deliver_to_the_message_one() -> None:
    x = MemoryStreams()
    got: list[str] = []
    await x.start_streams(
        on_message=lambda m: got.append(m.id),
        on_conversation=lambda c: None,
        on_consent=lambda u: None,
        on_restart=lambda: None,
    )
    _, alice = x.peer("alice")
    m = x.store(x.dm(alice), alice, b"hi")
    x.deliver(m)
    assert got == [m.id]
    assert all(h.connected for h in x.stream_health())


async def test_groups_rank_the_creator_first_and_add_only_new_members() -> None:
    x = MemoryXmtp()
    groups = MemoryGroups(x)
    _, alice = x.peer("alice")
    _, bob = x.peer("bob")
    cid = x.group(alice, [])
    assert await groups.add_members(cid, [bob, alice]) == [bob]
    members = await groups.members(cid)
    assert members[0].inbox_id == alice and members[0].role is Role.SUPER_ADMIN
    assert await groups.member_count(cid) == 3
    made = await groups.create_local(name="n", description=None, image_url=None, app_data="k")
    assert await groups.find_created("k") == made
    await groups.leave(made)
    assert not (await groups.details([made]))[made].active
    with pytest.raises(NotFound):
        await groups.members(x.dm(bob))  # a DM is no group


async def test_installations_revoke_the_given_ones_or_every_other() -> None:
    inst = MemoryInstallations("this")
    inst.ids += ["a", "b", "c"]
    assert await inst.revoke(["a"]) == (["a"], 3)
    assert await inst.revoke(None) == (["b", "c"], 1)
    assert inst.ids == ["this"]


async def test_the_memory_node_answers_what_is_set_for_every_probe() -> None:
    node = MemoryNode()
    probe = node.node_probe("https://gateway.invalid")
    assert (await probe.ask(1.0)).view is NodeView.KNOWS_IDENTITY
    node.answer = NodeAnswer(NodeView.IDENTITY_UNKNOWN, "reset")
    assert await probe.ask(1.0) == node.answer
    await probe.close()
    assert (node.gateways, node.asked, node.closed) == (["https://gateway.invalid"], 2, 1)


async def test_fetching_hands_back_the_envelope_or_the_error_and_a_404_otherwise() -> None:
    files = MemoryFetching()
    files.files["https://a.invalid/1"] = b"envelope"
    files.files["https://a.invalid/2"] = DownloadError("refused: not https")
    assert await files.fetch_attachment({"url": "https://a.invalid/1"}) == b"envelope"
    with pytest.raises(DownloadError, match="not https"):
        await files.fetch_attachment({"url": "https://a.invalid/2"})
    with pytest.raises(DownloadError, match="404"):
        await files.fetch_attachment({"url": "https://a.invalid/3"})
    assert len(files.fetched) == 3


async def test_the_database_is_released_once_until_reconnected() -> None:
    db = MemoryDatabase()
    await db.release_db()
    with pytest.raises(RuntimeError):
        await db.release_db()
    await db.reconnect_db()
    await db.release_db()
    assert db.releases == 2
