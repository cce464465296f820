"""A listing keeps what only libxmtp knows of a conversation (a group's name,
description, image, member count, whether this identity is in it) in cone's store:
read from libxmtp once, and again only after a group update was taken in or cone
changed the group itself (cone/store/details.py)."""

from __future__ import annotations

import asyncio

import pytest

from cone.core.history import ConversationView
from cone.core.service import Core
from cone.engine.port import Details
from cone.errors import Unavailable
from cone.store import Connection, details
from support.fake_engine import FakeEngine
from support.waiting import until


class _Asked:
    """The engine's details read, counting which conversations each read asked for."""

    def __init__(self, engine: FakeEngine) -> None:
        self._read = engine.groups.details
        self.asked: list[list[str]] = []
        self.during: asyncio.Future[None] | None = None  # awaited inside the read

    async def __call__(self, conversation_ids: list[str]) -> dict[str, Details]:
        self.asked.append(list(conversation_ids))
        found = await self._read(conversation_ids)
        if self.during is not None:
            await self.during
        return found


@pytest.fixture
def asked(engine: FakeEngine, monkeypatch: pytest.MonkeyPatch) -> _Asked:
    counting = _Asked(engine)
    monkeypatch.setattr(engine.groups, "details", counting)
    return counting


async def _listed(core: Core) -> dict[str, ConversationView]:
    views, _ = await core.history.conversations(
        consumer="", consent=None, kind=None, limit=None, cursor=None
    )
    return {v.id: v for v in views}


async def _group(core: Core, engine: FakeEngine) -> tuple[str, str]:
    _, alice = engine.peer("alice")
    _, bob = engine.peer("bob")
    cid = engine.group(alice, [bob])
    engine.held[cid].name = "team"
    engine.incoming(cid, alice, "hello")
    await core.intake.ingestor.ingest_all()
    return cid, alice


async def test_a_second_listing_reads_nothing_from_libxmtp(
    core: Core, engine: FakeEngine, asked: _Asked
) -> None:
    cid, _ = await _group(core, engine)
    _, carol = engine.peer("carol")
    dm = engine.dm(carol)
    engine.incoming(dm, carol, "hi")
    await core.intake.ingestor.ingest_all()

    first = await _listed(core)
    assert sorted(asked.asked[0]) == sorted([cid, dm])
    assert (first[cid].name, first[cid].member_count, first[cid].active) == ("team", 3, True)
    assert (first[dm].name, first[dm].member_count, first[dm].active) == (None, None, True)

    again = await _listed(core)
    assert len(asked.asked) == 1
    assert again == first
    # One conversation alone (what CreateGroup and UpdateGroup answer with) as well.
    assert await core.history.one(cid) == first[cid]
    assert len(asked.asked) == 1


async def test_a_group_update_taken_in_has_the_details_read_again_once(
    core: Core, engine: FakeEngine, asked: _Asked
) -> None:
    cid, alice = await _group(core, engine)
    await _listed(core)
    _, dave = engine.peer("dave")
    engine.held[cid].members.add(dave)
    engine.group_update(cid, alice, name="renamed")
    await core.intake.ingestor.ingest_all()

    listed = await _listed(core)
    assert asked.asked[1:] == [[cid]]
    assert (listed[cid].name, listed[cid].member_count) == ("renamed", 4)
    engine.incoming(cid, alice, "after")  # a text taken in counts nothing
    await core.intake.ingestor.ingest_all()
    await _listed(core)
    assert len(asked.asked) == 2

    # Read again by the start's full reconciliation, an update counts nothing.
    await core.intake.ingestor.reconciler.reconcile_all()
    await _listed(core)
    assert len(asked.asked) == 2


async def test_a_streamed_group_update_has_the_details_read_again(
    core: Core, engine: FakeEngine, asked: _Asked
) -> None:
    cid, alice = await _group(core, engine)
    await _listed(core)
    await core.intake.ingestor.start()
    try:
        core.intake.ingestor.accept(engine.group_update(cid, alice, name="streamed"))
        streamed_text = engine.incoming(cid, alice, "sentinel")
        core.intake.ingestor.accept(streamed_text)

        async def in_store() -> bool:
            return (await _listed(core))[cid].name == "streamed"

        await until(in_store)
    finally:
        await core.intake.ingestor.stop()
    assert asked.asked[-1] == [cid]


async def test_an_update_taken_in_during_a_listing_s_read_leaves_the_details_to_read_again(
    core: Core, engine: FakeEngine, asked: _Asked
) -> None:
    """libxmtp may apply an update after the listing read its details and before
    cone counts it: what the listing keeps then is not taken as current."""
    cid, alice = await _group(core, engine)
    asked.during = asyncio.get_running_loop().create_future()
    listing = asyncio.create_task(_listed(core))

    async def reading() -> bool:
        return bool(asked.asked)

    await until(reading)
    engine.group_update(cid, alice, name="changed meanwhile")
    await core.intake.ingestor.ingest_all()
    asked.during.set_result(None)
    assert (await listing)[cid].name == "team"  # read before the update
    asked.during = None

    assert (await _listed(core))[cid].name == "changed meanwhile"
    assert len(asked.asked) == 2


async def test_cone_s_own_changes_have_the_details_read_again_even_when_they_fail(
    core: Core, engine: FakeEngine, asked: _Asked, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid, _ = await _group(core, engine)
    await _listed(core)
    view = await core.groups.update(cid, name="mine", description=None, image_url=None)
    assert view.name == "mine"
    _, erin = engine.peer("erin")
    await core.groups.add(cid, [erin])
    assert (await _listed(core))[cid].member_count == 4
    reads = len(asked.asked)

    # A listing reads while libxmtp makes the change; libxmtp then applies it
    # locally and fails to publish it.
    update = engine.groups.update
    go = asyncio.get_running_loop().create_future()
    making = asyncio.Event()

    async def applied_then_failed(conversation_id: str, **kw: str | None) -> None:
        making.set()
        await go
        await update(conversation_id, **kw)
        raise Unavailable("the node went away", reason="network")

    monkeypatch.setattr(engine.groups, "update", applied_then_failed)
    changing = asyncio.create_task(
        core.groups.update(cid, name="half done", description=None, image_url=None)
    )
    await making.wait()
    assert (await _listed(core))[cid].name == "mine"
    go.set_result(None)
    with pytest.raises(Unavailable):
        await changing
    assert (await _listed(core))[cid].name == "half done"
    assert len(asked.asked) == reads + 2


async def test_a_conversation_libxmtp_cannot_read_keeps_nothing(
    core: Core, engine: FakeEngine, asked: _Asked
) -> None:
    cid, _ = await _group(core, engine)
    gone = engine.held.pop(cid)
    for _ in range(2):
        listed = await _listed(core)
        assert (listed[cid].name, listed[cid].active) == (None, True)
    assert asked.asked == [[cid], [cid]]
    engine.held[cid] = gone
    assert (await _listed(core))[cid].name == "team"


async def test_an_older_read_never_replaces_a_newer_one(core: Core) -> None:
    """Two listings racing: the one that saw fewer changes does not overwrite."""
    cid = "c" * 32
    old = details.KnownDetails("old", None, None, 2, True)
    new = details.KnownDetails("new", None, None, 3, True)
    await core.store.write(details.changed, [cid])
    await core.store.write(details.record, [details.ReadDetails(cid, 1, new)])
    await core.store.write(details.record, [details.ReadDetails(cid, 0, old)])

    def kept(conn: Connection) -> tuple[int, details.KnownDetails | None]:
        row = conn.execute(  # the listing's own columns
            f"SELECT {details.COLUMNS} FROM details d WHERE d.conversation_id = ?", (cid,)
        ).fetchone()
        return details.from_row(row)

    assert await core.store.read(kept) == (1, new)
