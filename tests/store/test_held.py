"""What requests may hold: the budget's count and bytes on a real store (SQLCipher)."""

from __future__ import annotations

import pytest

from cone.limits import RequestBudget
from cone.store import (
    Connection,
    Consent,
    Kind,
    Store,
    StoredAttachment,
    StoredMessage,
    conversations,
    held,
    inbox,
)


def _message(
    conversation_id: str,
    i: int,
    text: str = "hi",
    *,
    fallback: str | None = None,
    files: tuple[StoredAttachment, ...] = (),
) -> StoredMessage:
    return StoredMessage(
        id=f"{conversation_id}{i:060x}",
        conversation_id=conversation_id,
        sender_inbox_id="whoever",
        sent_at_ns=1_000 + i,
        content_type="xmtp.org/text:1.0",
        text=text,
        fallback=fallback,
        attachments=files,
    )


def _admit(store: Store, cid: str, rows: list[StoredMessage], budget: RequestBudget) -> int:
    """Admit and insert as the commit does; returns how many were kept."""

    def run(conn: Connection) -> int:
        conv = conversations.require(conn, cid)
        kept, _ = held.admit(conn, conv, rows, budget)
        inbox.insert_messages(conn, kept)
        return len(kept)

    return store.write_now(run)


def test_a_held_message_counts_what_the_store_measures_of_it(store: Store) -> None:
    store.write_now(conversations.ensure, "aa", Kind.DM, "x", Consent.REQUESTED, 1)
    files = (StoredAttachment(0, "a.bin", "application/octet-stream", data=b"\1" * 5000),)
    rows = [_message("aa", 0, "héllo"), _message("aa", 1, files=files, fallback="f")]
    _admit(store, "aa", rows, RequestBudget())
    assert store.read_now(held.usage, "x") == (2, sum(held.message_bytes(r) for r in rows))
    assert store.read_now(held.usage) == store.read_now(held.usage, "x")


def test_a_sender_s_dms_and_the_groups_it_invited_to_share_its_budget(store: Store) -> None:
    store.write_now(conversations.ensure, "d1", Kind.DM, "x", Consent.REQUESTED, 1)
    store.write_now(conversations.ensure, "g1", Kind.GROUP, "x", Consent.REQUESTED, 1)
    store.write_now(conversations.ensure, "d2", Kind.DM, "y", Consent.REQUESTED, 1)
    budget = RequestBudget(sender_messages=3, total_messages=5)
    assert _admit(store, "d1", [_message("d1", i) for i in range(2)], budget) == 2
    assert _admit(store, "g1", [_message("g1", i) for i in range(2)], budget) == 1
    assert _admit(store, "d2", [_message("d2", i) for i in range(4)], budget) == 2  # in all: 5
    assert store.read_now(held.dropped_count) == 1 + 2
    # What was dropped is read: no path takes it again.
    assert store.read_now(inbox.known_ids, [_message("g1", 1).id]) == {_message("g1", 1).id}


def test_bytes_bound_a_sender_and_accepted_conversations_are_not_counted(store: Store) -> None:
    store.write_now(conversations.ensure, "d1", Kind.DM, "x", Consent.REQUESTED, 1)
    store.write_now(conversations.ensure, "ok", Kind.DM, "x", Consent.ACCEPTED, 1)
    one = held.message_bytes(_message("d1", 0, "z" * 1000))
    budget = RequestBudget(sender_bytes=2 * one + 10)
    rows = [_message("d1", i, "z" * 1000) for i in range(4)]
    assert _admit(store, "d1", rows, budget) == 2
    assert _admit(store, "ok", [_message("ok", i, "z" * 1000) for i in range(4)], budget) == 4
    assert store.read_now(held.usage, "x") == (2, 2 * one)
    # Accepting releases what was kept; it no longer counts as held.
    store.write_now(conversations.set_consent, "d1", Consent.ACCEPTED, 2)
    assert store.read_now(held.usage) == (0, 0)


def test_the_environment_sets_the_budget_and_rejects_what_is_not_a_count() -> None:
    budget = RequestBudget.from_environment({"CONE_REQUEST_SENDER_MESSAGES": "7"})
    assert budget == RequestBudget(sender_messages=7)
    with pytest.raises(Exception, match="CONE_REQUEST_TOTAL_BYTES must be a whole number"):
        RequestBudget.from_environment({"CONE_REQUEST_TOTAL_BYTES": "-1"})
