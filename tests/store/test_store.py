"""The SQLCipher store: keys, durability rules, inbox and receipts (real SQLCipher)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import threading
from pathlib import Path

import pytest

from cone.errors import NotFound, StateError
from cone.store import Consent, Kind, Store, StoredMessage, _acked, conversations, history, inbox
from cone.store._db import Connection
from cone.store._migrations import MIGRATIONS

KEY = bytes(range(32))


def _msg(i: int, conv: str = "c1", sender: str = "peer", key: str | None = None) -> StoredMessage:
    return StoredMessage(
        id=f"m{i:04d}",
        conversation_id=conv,
        sender_inbox_id=sender,
        sent_at_ns=1_000 + i,
        content_type="xmtp.org/text:1.0",
        text=f"secret-marker-{i}",
        send_key=key,
    )


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.open(tmp_path / "cone.db", KEY)
    s.write_now(conversations.ensure, "c1", Kind.DM, "peer", Consent.ACCEPTED, 1)
    return s


def test_a_wrong_key_is_a_clear_error_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cone.db"
    s = Store.open(path, KEY)
    s.write_now(conversations.ensure, "c1", Kind.DM, "peer", Consent.ACCEPTED, 1)
    s.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StateError) as err:
        Store.open(path, bytes(32))
    assert err.value.reason == "wrong_key"
    assert "CONE_DB_KEY" in str(err.value)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    Store.open(path, KEY).close()


def test_store_files_are_private_and_hold_no_plaintext(store: Store, tmp_path: Path) -> None:
    store.write_now(inbox.insert_messages, [_msg(i) for i in range(20)])
    store.close()
    for f in tmp_path.iterdir():
        assert f.stat().st_mode & 0o077 == 0, f
        assert b"secret-marker" not in f.read_bytes(), f


def test_schema_is_at_the_latest_version_and_a_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cone.db"
    s = Store.open(path, KEY)
    assert s.read_now(lambda c: c.execute("PRAGMA user_version").fetchone()[0]) == len(MIGRATIONS)
    s.write_now(lambda c: c.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}"))
    s.close()
    with pytest.raises(StateError, match="newer"):
        Store.open(path, KEY)


def test_each_message_enters_once_and_a_repeated_send_key_is_dropped(store: Store) -> None:
    assert store.write_now(inbox.insert_messages, [_msg(1), _msg(2, key="k")]) == ["m0001", "m0002"]
    assert store.write_now(inbox.insert_messages, [_msg(1), _msg(3, key="k")]) == []
    assert store.read_now(inbox.message_count) == 2


def test_a_conversation_s_known_ids_are_its_delivered_and_skipped_ones_up_to_a_bound(
    store: Store,
) -> None:
    store.write_now(conversations.ensure, "c2", Kind.DM, "other", Consent.ACCEPTED, 1)
    store.write_now(inbox.insert_messages, [_msg(i) for i in range(3)] + [_msg(9, "c2")])
    store.write_now(inbox.skip, "c1", ["own-1", "own-2"])
    store.write_now(inbox.skip, "c2", ["own-9"])
    ids = {"m0000", "m0001", "m0002", "own-1", "own-2"}
    assert store.read_now(inbox.known_in, "c1", 5) == ids
    assert store.read_now(inbox.known_in, "c1", 4) is None  # more than it may hold
    assert store.read_now(inbox.known_in, "c1", 2) is None  # past it on the first table already
    assert store.read_now(inbox.known_in, "c2", 5) == {"m0009", "own-9"}
    assert store.read_now(inbox.known_in, "c3", 5) == set()
    assert store.read_now(inbox.known_ids, sorted(ids)) == ids  # what a lookup finds


def test_consumers_are_independent_and_acks_are_idempotent(store: Store) -> None:
    store.write_now(inbox.insert_messages, [_msg(i) for i in range(5)])
    a, more = store.write_now(inbox.take_pending, "a", 3, [], 1)
    assert [m.id for m in a] == ["m0000", "m0001", "m0002"] and more
    assert store.write_now(inbox.ack, "a", ["m0000", "m0001"], 5) == 2
    assert store.write_now(inbox.ack, "a", ["m0000", "m0001"], 6) == 2
    a2, more = store.write_now(inbox.take_pending, "a", 10, [], 1)
    assert [m.id for m in a2] == ["m0002", "m0003", "m0004"] and not more
    assert a2[0].deliveries == 2
    b, _ = store.write_now(inbox.take_pending, "b", 10, [], 1)
    assert len(b) == 5 and b[0].deliveries == 1


def test_an_ack_with_an_unknown_id_records_nothing(store: Store) -> None:
    store.write_now(inbox.insert_messages, [_msg(1)])
    with pytest.raises(NotFound) as err:
        store.write_now(inbox.ack, "a", ["m0001", "nope"], 5)
    assert err.value.reason == "unknown_message"
    pending, _ = store.write_now(inbox.take_pending, "a", 10, [], 1)
    assert [m.id for m in pending] == ["m0001"]


def test_only_accepted_conversations_and_unblocked_senders_are_pending(store: Store) -> None:
    store.write_now(conversations.ensure, "req", Kind.DM, "stranger", Consent.REQUESTED, 2)
    store.write_now(conversations.ensure, "dm2", Kind.DM, "troll", Consent.ACCEPTED, 3)
    store.write_now(conversations.ensure, "grp", Kind.GROUP, "friend", Consent.ACCEPTED, 4)
    store.write_now(
        inbox.insert_messages,
        [_msg(1, "req", "stranger"), _msg(2, "grp", "troll"), _msg(3, "grp", "friend")],
    )
    ids = lambda: [m.id for m in store.write_now(inbox.take_pending, "a", 10, [], 1)[0]]  # noqa: E731
    assert ids() == ["m0002", "m0003"]
    store.write_now(conversations.set_consent, "dm2", Consent.BLOCKED, 5)
    assert ids() == ["m0003"]
    store.write_now(conversations.set_consent, "req", Consent.ACCEPTED, 6)
    assert ids() == ["m0003", "m0001"]  # released now: after what was receivable before
    assert [m.id for m in store.write_now(inbox.take_pending, "a", 10, ["req"], 1)[0]] == ["m0003"]


def test_a_conversation_of_ones_own_is_accepted_whoever_recorded_it_first(store: Store) -> None:
    own = lambda cid: store.write_now(conversations.accept_own, cid, Kind.GROUP, "", 5)  # noqa: E731
    consent = lambda cid: store.read_now(conversations.require, cid).consent  # noqa: E731
    assert own("new") is False and consent("new") is Consent.ACCEPTED
    assert own("new") is False
    # A listing recorded it first as a request (or it was blocked): accepted now, and
    # what waited in it becomes receivable.
    store.write_now(conversations.ensure, "listed", Kind.GROUP, "", Consent.REQUESTED, 2)
    store.write_now(inbox.insert_messages, [_msg(1, "listed", "member")])
    assert store.write_now(inbox.take_pending, "a", 10, [], 3)[0] == []
    assert own("listed") is True and consent("listed") is Consent.ACCEPTED
    assert [m.id for m in store.write_now(inbox.take_pending, "a", 10, [], 6)[0]] == ["m0001"]
    store.write_now(conversations.set_consent, "listed", Consent.BLOCKED, 7)
    assert own("listed") is True and consent("listed") is Consent.ACCEPTED


def test_accepting_a_request_gives_its_messages_new_sequences_and_keeps_receipts(
    store: Store,
) -> None:
    store.write_now(conversations.ensure, "req", Kind.DM, "stranger", Consent.ACCEPTED, 2)
    store.write_now(inbox.insert_messages, [_msg(1, "req", "stranger"), _msg(2, "req", "x")])
    store.write_now(inbox.insert_messages, [_msg(3), _msg(4, "req", "stranger")])
    # delivered once and one acknowledged, then blocked while more came in
    store.write_now(inbox.take_pending, "a", 10, [], 1)
    store.write_now(inbox.ack, "a", ["m0001"], 2)
    store.write_now(conversations.set_consent, "req", Consent.BLOCKED, 3)
    store.write_now(inbox.insert_messages, [_msg(5), _msg(6, "req", "stranger")])
    _, _, head = store.read_now(inbox.peek, "", 0, 10)
    store.write_now(conversations.set_consent, "req", Consent.REQUESTED, 4)
    store.write_now(conversations.set_consent, "req", Consent.ACCEPTED, 5)
    # A follower at the old head sees the released messages, in their own order.
    after, _, new_head = store.read_now(inbox.peek, "", head, 10)
    assert [m.id for m in after] == ["m0001", "m0002", "m0004", "m0006"]
    assert [m.seq for m in after] == list(range(head + 1, head + 5)) and new_head == head + 4
    # Receipts moved with them: acknowledged stays acknowledged, counts are kept.
    pending, _ = store.write_now(inbox.take_pending, "a", 10, [], 9)
    assert [(m.id, m.deliveries) for m in pending] == [
        ("m0003", 2), ("m0005", 1), ("m0002", 2), ("m0004", 2), ("m0006", 1)
    ]  # fmt: skip
    # A sequence is never given twice, also after the moved ones.
    store.write_now(inbox.insert_messages, [_msg(7)])
    assert store.read_now(inbox.peek, "", new_head, 10)[0][0].seq == new_head + 1


def test_pending_is_read_from_the_acknowledged_point_and_unblocking_brings_older_back(
    store: Store,
) -> None:
    """Receive reads only past the consumer's acknowledged point (a long acked history
    is not read again); what an unblock makes receivable below it still comes."""
    store.write_now(conversations.ensure, "dm2", Kind.DM, "troll", Consent.ACCEPTED, 2)
    store.write_now(conversations.ensure, "grp", Kind.GROUP, "friend", Consent.ACCEPTED, 3)
    store.write_now(conversations.set_consent, "dm2", Consent.BLOCKED, 4)
    store.write_now(inbox.insert_messages, [_msg(i) for i in range(1, 4)])
    store.write_now(inbox.insert_messages, [_msg(4, "grp", "troll"), _msg(5)])
    take = lambda: [m.id for m in store.write_now(inbox.take_pending, "a", 10, [], 1)[0]]  # noqa: E731
    assert take() == ["m0001", "m0002", "m0003", "m0005"]
    # A conversations page counts what Receive would take, from the same point.
    assert _listed_pending(store, "a") == {"c1": 4, "dm2": 0, "grp": 0}
    store.write_now(inbox.ack, "a", ["m0001", "m0002"], 2)
    assert store.read_now(_acked.through, "a") == 2  # up to the first pending one
    assert _listed_pending(store, "a") == {"c1": 2, "dm2": 0, "grp": 0}
    store.write_now(inbox.ack, "a", ["m0003", "m0005"], 2)
    assert store.read_now(_acked.through, "a") == 5  # past the blocked sender's too
    assert take() == [] and store.read_now(inbox.pending_counts) == [("a", 0)]
    store.write_now(inbox.insert_messages, [_msg(6)])
    assert take() == ["m0006"]
    assert _listed_pending(store, "a") == {"c1": 1, "dm2": 0, "grp": 0}
    # Unblocking the sender makes m0004, below the point, receivable again.
    store.write_now(history.unblock, "dm2")
    assert take() == ["m0004", "m0006"]
    assert store.read_now(inbox.pending_counts) == [("a", 2)]
    assert _listed_pending(store, "a") == {"c1": 1, "dm2": 0, "grp": 1}
    assert [m.id for m in store.read_now(inbox.peek, "a", 0, 10)[0]] == ["m0004", "m0006"]


def _listed_pending(store: Store, consumer: str) -> dict[str, int]:
    rows, _ = store.read_now(
        functools.partial(
            history.conversations, consumer=consumer, consent=None, kind=None, limit=10, cursor=None
        )
    )
    return {r.conversation.id: r.pending for r in rows}


def test_take_pending_after_a_seq_looks_only_past_it(store: Store) -> None:
    for i in range(4):
        store.write_now(inbox.insert_messages, [_msg(i)])
    head = store.read_now(inbox.head)
    store.write_now(inbox.insert_messages, [_msg(4)])

    later, more = store.write_now(inbox.take_pending, "a", 10, [], 1, after_seq=head)
    every, _ = store.write_now(inbox.take_pending, "a", 10, [], 1)

    assert [m.id for m in later] == ["m0004"] and not more
    assert [m.id for m in every] == ["m0000", "m0001", "m0002", "m0003", "m0004"]


def test_a_take_that_leaves_the_acknowledged_point_where_it_was_writes_only_receipts(
    store: Store,
) -> None:
    """The take that serves a waiting receive runs in ingest's commit: every row it
    writes is pages to encrypt and sync before the message is handed out. A consumer
    that acknowledged everything leaves its point where it is, so only the delivery
    receipt is written; a point that moves is still recorded."""
    store.write_now(inbox.insert_messages, [_msg(1), _msg(2)])
    taken, _ = store.write_now(inbox.take_pending, "a", 10, [], 1)
    store.write_now(inbox.ack, "a", [m.id for m in taken], 2)
    head = store.read_now(inbox.head)
    assert store.read_now(_acked.through, "a") == head
    store.write_now(inbox.insert_messages, [_msg(3)])

    def take_counting_rows(conn: Connection) -> tuple[list[str], int]:
        before = conn.total_changes
        got, _ = inbox.take_pending(conn, "a", 10, [], 3, after_seq=head)
        return [m.id for m in got], conn.total_changes - before

    assert store.write_now(take_counting_rows) == (["m0003"], 1)  # the receipt alone
    assert store.read_now(_acked.through, "a") == head
    store.write_now(inbox.ack, "a", ["m0003"], 4)
    assert store.read_now(_acked.through, "a") == head + 1  # a moved point is written


async def test_a_read_hands_back_its_result_its_error_and_survives_its_caller_leaving(
    store: Store,
) -> None:
    assert (await store.read(conversations.require, "c1")).id == "c1"
    with pytest.raises(NotFound):
        await store.read(conversations.require, "nope")
    errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    # The store's thread held up, so the read's outcome arrives after its caller left.
    held, release = threading.Event(), threading.Event()

    def hold(conn: object) -> None:
        held.set()
        release.wait(timeout=30)

    holding = asyncio.ensure_future(store.read(hold))
    assert await asyncio.to_thread(held.wait, 30)
    left = asyncio.ensure_future(store.read(conversations.require, "c1"))
    await asyncio.sleep(0)
    left.cancel()
    release.set()
    await holding
    with pytest.raises(asyncio.CancelledError):
        await left
    # The late outcome went nowhere (it came back before this later read's); the next
    # read is answered as usual.
    assert (await store.read(conversations.require, "c1")).id == "c1"
    assert errors == []
