"""The one record of a message against the store's schema (real SQLCipher): its
columns are the `messages` table's, written and read back by name, so a new field is
the record's field and a migration's column, and nothing else in the store."""

from __future__ import annotations

import hashlib
from dataclasses import fields

from cone.store import (
    AttachmentsKind,
    Consent,
    Kind,
    Removed,
    Store,
    StoredAttachment,
    StoredMessage,
    conversations,
    history,
    inbox,
    retention,
)
from cone.store.records import CONTENT_COLUMNS, MESSAGE_COLUMNS


def test_the_records_columns_are_the_columns_of_the_messages_table(store: Store) -> None:
    table = {row[1] for row in store.read_now(lambda c: c.execute("PRAGMA table_info(messages)"))}
    # `removed_ns` is when retention took the content out: the store's own bookkeeping.
    assert table - {"removed_ns"} == set(MESSAGE_COLUMNS)
    assert set(CONTENT_COLUMNS) < set(MESSAGE_COLUMNS)


def test_a_record_comes_back_as_it_went_in_field_by_field(store: Store) -> None:
    store.write_now(conversations.ensure, "c1", Kind.GROUP, "peer", Consent.ACCEPTED, 1)
    sent = StoredMessage(
        id="01",
        conversation_id="c1",
        sender_inbox_id="peer",
        sent_at_ns=5,
        content_type="xmtp.org/reply:1.0",
        text="t",
        data_json="{}",
        reply_to="02",
        fallback="f",
        send_key="k",
        unreadable="u",
        reaction_json="{}",
        content_json="[]",
        attachments=(StoredAttachment(0, "a.txt", "text/plain", data=b"abc"),),
        attachments_kind=AttachmentsKind.ONE,
    )
    assert store.write_now(inbox.insert_messages, [sent]) == ["01"]
    (peeked,), _, _ = store.read_now(inbox.peek, "", 0, 10)
    (listed,), _ = store.read_now(
        history.messages,
        conversation_id="c1",
        before=None,
        after=None,
        limit=10,
        oldest_first=True,
    )
    # The store records a file's size and digest, and never hands out its reference.
    file = StoredAttachment(0, "a.txt", "text/plain", 3, hashlib.sha256(b"abc").hexdigest(), b"abc")
    expected = {
        **{f.name: getattr(sent, f.name) for f in fields(StoredMessage)},
        "seq": 1,
        "kind": Kind.GROUP,
        "attachments": (file,),
    }
    for got in (peeked, listed):
        assert isinstance(got, StoredMessage)
        assert {f.name: getattr(got, f.name) for f in fields(StoredMessage)} == expected
    assert isinstance(peeked.kind, Kind) and isinstance(peeked.attachments_kind, AttachmentsKind)


def test_a_removal_clears_the_content_columns_and_says_why(store: Store) -> None:
    store.write_now(conversations.ensure, "c1", Kind.DM, "peer", Consent.ACCEPTED, 1)
    full = StoredMessage("01", "c1", "peer", 5, "t", text="t", fallback="f", reply_to="02")
    store.write_now(inbox.insert_messages, [full])
    store.write_now(retention.record_deletions, "c1", [("01", "peer")], 6)
    store.write_now(retention.apply_deletions, "c1", 7)
    (got,), _ = store.read_now(
        history.messages,
        conversation_id="c1",
        before=None,
        after=None,
        limit=10,
        oldest_first=True,
    )
    assert isinstance(got, StoredMessage)
    assert got.removed is Removed.DELETED
    assert all(getattr(got, c) is None for c in CONTENT_COLUMNS)
    assert (got.reply_to, got.content_type) == ("02", "t")  # metadata stays
