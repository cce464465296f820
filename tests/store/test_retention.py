"""Deletions and expiry in the store (real SQLCipher): order, senders, receipts, paging."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from cone.store import (
    Consent,
    Kind,
    Store,
    StoredMessage,
    conversations,
    history,
    inbox,
)
from cone.store import retention as r

KEY = bytes(range(32))


def _msg(i: int, sender: str = "peer", sent_at_ns: int | None = None) -> StoredMessage:
    return StoredMessage(
        id=f"{i:04x}",
        conversation_id="c1",
        sender_inbox_id=sender,
        sent_at_ns=1_000 + i if sent_at_ns is None else sent_at_ns,
        content_type="xmtp.org/text:1.0",
        text=f"text {i}",
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "cone.db", KEY)
    s.write_now(conversations.ensure, "c1", Kind.DM, "peer", Consent.ACCEPTED, 1)
    yield s
    s.close()


def _texts(store: Store) -> list[tuple[str | None, str | None]]:
    rows, _ = store.read_now(
        functools.partial(
            history.messages, conversation_id="c1", before=None,
            after=None, limit=100, oldest_first=True,
        )
    )  # fmt: skip
    return [(row.text, row.removed) for row in rows if isinstance(row, StoredMessage)]


def test_a_deletion_that_comes_before_its_message_is_applied_when_it_arrives(
    store: Store,
) -> None:
    store.write_now(r.record_deletions, "c1", [("0001", "peer")], 5)
    cleared, waiting = store.write_now(r.apply_deletions, "c1", 5)
    assert (cleared, waiting) == ([], 1)
    assert store.read_now(r.waiting_deletions) == {"c1"}
    store.write_now(inbox.insert_messages, [_msg(0), _msg(1)])
    assert store.write_now(r.apply_deletions, "c1", 6) == (["0001"], 0)
    assert _texts(store) == [("text 0", None), (None, "deleted")]
    assert store.read_now(r.waiting_deletions) == set()


def test_a_deletion_only_removes_a_message_of_its_sender(store: Store) -> None:
    store.write_now(inbox.insert_messages, [_msg(0, sender="bob")])
    store.write_now(r.record_deletions, "c1", [("0000", "mallory")], 5)
    assert store.write_now(r.apply_deletions, "c1", 5) == ([], 0)
    assert _texts(store) == [("text 0", None)]


def test_removed_messages_are_withdrawn_unless_already_handed_out(store: Store) -> None:
    store.write_now(inbox.insert_messages, [_msg(0), _msg(1), _msg(2)])
    handed, _ = store.write_now(inbox.take_pending, "a", 2, [], 1)
    assert [m.id for m in handed] == ["0000", "0001"]
    store.write_now(r.record_deletions, "c1", [("0001", "peer"), ("0002", "peer")], 5)
    store.write_now(r.apply_deletions, "c1", 5)
    again, _ = store.write_now(inbox.take_pending, "a", 10, [], 2)
    assert [(m.id, m.text, m.removed) for m in again] == [
        ("0000", "text 0", None),
        ("0001", None, "deleted"),
    ]
    fresh, _ = store.write_now(inbox.take_pending, "b", 10, [], 2)
    assert [m.id for m in fresh] == ["0000"]
    assert store.write_now(inbox.ack, "a", ["0001"], 3) == 1  # still acknowledgeable


def test_expiry_follows_the_setting_and_only_from_when_it_was_set(store: Store) -> None:
    store.write_now(
        inbox.insert_messages,
        [_msg(0, sent_at_ns=100), _msg(1, sent_at_ns=500), _msg(2, sent_at_ns=900)],
    )
    assert store.write_now(r.set_disappearing, {"c1": (400, 1_000)})
    assert not store.write_now(r.set_disappearing, {"c1": (400, 1_000)})  # unchanged
    assert store.read_now(r.next_due) == 1_500
    assert store.write_now(r.expire, 1_499) == 0
    assert store.write_now(r.expire, 1_500) == 1
    assert store.read_now(r.next_due) == 1_900
    assert store.write_now(r.expire, 5_000) == 1
    # The message sent before the setting stays; expired ones leave history.
    assert _texts(store) == [("text 0", None)]
    assert store.read_now(r.next_due) is None
    assert store.write_now(r.set_disappearing, {"c1": None})
    assert store.read_now(r.disappearing) == {}


def test_removal_takes_reactions_structured_content_and_files_too(store: Store) -> None:
    from dataclasses import replace

    from cone.store import StoredAttachment, attachments

    file = StoredAttachment(0, filename="a.txt", mime_type="text/plain", size=5, data=b"bytes")
    with_file = replace(_msg(0), text=None, attachments=(file,), attachments_kind=1)
    reaction = replace(_msg(1), text=None, reaction_json='{"emoji":"x"}')
    structured = replace(_msg(2), text=None, content_json='{"amount":1}')
    store.write_now(inbox.insert_messages, [with_file, reaction, structured])
    assert store.read_now(attachments.get, "0000", 0) is not None
    store.write_now(r.record_deletions, "c1", [("0000", "peer"), ("0001", "peer")], 5)
    store.write_now(r.apply_deletions, "c1", 6)
    store.write_now(r.set_disappearing, {"c1": (0, 10)})
    store.write_now(r.expire, 10_000)
    rows = store.read_now(
        lambda c: c.execute(
            "SELECT text, data_json, fallback, reaction_json, content_json, removed"
            " FROM messages ORDER BY id"
        ).fetchall()
    )
    assert [row[:5] for row in rows] == [(None,) * 5] * 3
    assert [row[5] for row in rows] == ["deleted", "deleted", "expired"]
    assert store.read_now(lambda c: c.execute("SELECT count(*) FROM attachments").fetchone()) == (
        0,
    )
