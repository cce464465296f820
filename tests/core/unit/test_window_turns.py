"""The catch-up's window check in a big store: every conversation in turn, within
`ROUNDS` periods, new ones included; a small store whole every period."""

from __future__ import annotations

from cone.core.intake.window_turns import WindowTurns
from cone.core.service import Core
from cone.engine.port import ListedConversation
from cone.store import inbox
from support.fake_engine import FakeEngine


def _listing(*ids: str) -> list[ListedConversation]:
    return [ListedConversation(i) for i in ids]


def _id(c: ListedConversation) -> str:
    return c.id


def _ids(turn: list[ListedConversation]) -> list[str]:
    return [c.id for c in turn]


def test_a_small_store_is_checked_whole_every_period() -> None:
    turns = WindowTurns(_id, all_up_to=3, rounds=4)
    listing = _listing("c", "a", "b")
    assert _ids(turns.next(listing)) == ["c", "a", "b"]
    assert _ids(turns.next(listing)) == ["c", "a", "b"]


def test_a_big_store_is_checked_in_turns_each_conversation_within_rounds() -> None:
    turns = WindowTurns(_id, all_up_to=3, rounds=4)
    ids = [f"{i:02d}" for i in range(20)]
    listing = _listing(*reversed(ids))  # the listing's order does not matter
    seen = [_ids(turns.next(listing)) for _ in range(4)]
    assert [len(t) for t in seen] == [5, 5, 5, 5]  # a quarter each, in id order
    assert sorted(i for t in seen for i in t) == ids
    assert seen[0] == ids[:5] and turns.next(listing)[0].id == "00"  # then around again

    # A conversation that arrives mid-way is reached in its place, as are the rest.
    grown = _listing(*ids, "07a", "99")
    later = [_ids(turns.next(grown)) for _ in range(4)]
    assert {*ids, "07a", "99"} <= {i for t in later for i in t}


def test_a_turn_is_at_least_all_up_to_conversations() -> None:
    turns = WindowTurns(_id, all_up_to=3, rounds=100)
    listing = _listing(*(f"{i}" for i in range(7)))
    assert _ids(turns.next(listing)) == ["0", "1", "2"]
    assert _ids(turns.next(listing)) == ["3", "4", "5"]
    assert _ids(turns.next(listing)) == ["6", "0", "1"]


async def test_the_window_check_of_a_big_store_takes_a_message_the_sync_missed_within_its_turns(
    core: Core, engine: FakeEngine
) -> None:
    cids = []
    for name in ("alice", "bob", "carol"):
        _, peer = engine.peer(name)
        cids.append((engine.dm(peer), peer))
    await core.intake.ingestor.ingest_all()
    core.intake.ingestor.reconciler._window_turns = WindowTurns(_id, all_up_to=1, rounds=2)
    # In libxmtp's database, neither streamed nor read (as a type the listing hides).
    for cid, peer in cids:
        engine.incoming(cid, peer, "late")

    async def known() -> list[int]:
        return [await core.store.read(inbox.known_count, cid) for cid, _ in cids]

    await core.intake.ingestor.reconciler.reconcile(full=False)
    assert sorted(await known()) == [0, 1, 1]  # a turn of two of the three
    await core.intake.ingestor.reconciler.reconcile(full=False)
    assert await known() == [1, 1, 1]  # the rest in the next turn, each once
