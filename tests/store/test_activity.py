"""The listing's order: each conversation's last activity, kept by the store's
triggers on every write that moves it, and computed once for a store made before."""

from __future__ import annotations

import functools
from pathlib import Path

from cone.store import Consent, Kind, Store, StoredMessage, conversations, history, inbox
from cone.store._db import Connection
from cone.store._migrations import MIGRATIONS

KEY = bytes(range(32))


def _listed(store: Store, limit: int = 10) -> list[str]:
    out: list[str] = []
    cursor = None
    while True:
        rows, cursor = store.read_now(
            functools.partial(
                history.conversations,
                consumer="a",
                consent=None,
                kind=None,
                limit=limit,
                cursor=cursor,
            )
        )
        out += [r.conversation.id for r in rows]
        if cursor is None:
            return out


def _message(i: int, conv: str, sent_at_ns: int) -> StoredMessage:
    return StoredMessage(
        id=f"m{i:04d}",
        conversation_id=conv,
        sender_inbox_id="peer",
        sent_at_ns=sent_at_ns,
        content_type="xmtp.org/text:1.0",
        text="hi",
    )


def _fill(store: Store) -> None:
    for n, cid in enumerate(("c1", "c2", "c3"), start=1):
        store.write_now(conversations.ensure, cid, Kind.DM, f"p{n}", Consent.ACCEPTED, n)


def test_conversations_are_listed_by_their_newest_message_or_first_sight(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "cone.db", KEY)
    _fill(store)
    assert _listed(store) == ["c3", "c2", "c1"]
    store.write_now(inbox.insert_messages, [_message(1, "c1", 10)])
    assert _listed(store) == ["c1", "c3", "c2"]
    # An older message (a late arrival) moves nothing; paging keeps the order.
    store.write_now(inbox.insert_messages, [_message(2, "c2", 5)])
    assert _listed(store) == ["c1", "c2", "c3"]
    assert _listed(store, limit=1) == ["c1", "c2", "c3"]


def test_a_store_made_before_the_order_gets_it_when_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "cone.db"
    store = Store.open(path, KEY)
    _fill(store)
    store.write_now(inbox.insert_messages, [_message(1, "c1", 10)])

    def as_before(conn: Connection) -> None:
        for statement in (
            "DROP TRIGGER conversation_activity_seen",
            "DROP TRIGGER conversation_activity_message",
            "DROP TRIGGER conversation_activity_own",
            "DROP TRIGGER conversation_activity_own_id",
            "DROP INDEX conversations_by_activity",
            "ALTER TABLE conversations DROP COLUMN activity_ns",
            f"PRAGMA user_version = {len(MIGRATIONS) - 1}",
        ):
            conn.execute(statement)

    store.write_now(as_before)
    store.close()
    again = Store.open(path, KEY)
    assert _listed(again) == ["c1", "c3", "c2"]
    again.write_now(inbox.insert_messages, [_message(2, "c2", 20)])
    assert _listed(again) == ["c2", "c1", "c3"]
