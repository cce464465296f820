"""Receive batches are bounded by bytes as well as count (real SQLCipher)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cone import limits
from cone.store import Consent, Kind, Store, StoredMessage, conversations, inbox

KEY = bytes(range(32))


def _size(m: StoredMessage) -> int:
    """The size the store charges a message (MESSAGE_SIZE, computed here by hand)."""
    fields = [m.id, m.conversation_id, m.sender_inbox_id, m.content_type, m.text, m.data_json]
    fields += [m.reply_to, m.fallback]
    return inbox.MESSAGE_OVERHEAD_BYTES + sum(len(f.encode()) for f in fields if f is not None)


def _message(i: int, text: str) -> StoredMessage:
    return StoredMessage(
        id=f"{i:064x}",
        conversation_id="c1",
        sender_inbox_id="peer",
        sent_at_ns=1_000 + i,
        content_type="xmtp.org/text:1.0",
        text=text,
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.text(max_size=3000), min_size=1, max_size=40),
    limit=st.integers(1, 50),
    budget=st.integers(1, 20_000),
)
def test_every_batch_fits_its_budget_or_is_one_message_and_nothing_is_lost_or_repeated(
    texts: list[str], limit: int, budget: int
) -> None:
    with tempfile.TemporaryDirectory() as d:
        store = Store.open(Path(d) / "cone.db", KEY)
        try:
            store.write_now(conversations.ensure, "c1", Kind.DM, "peer", Consent.ACCEPTED, 1)
            sent = [_message(i, t) for i, t in enumerate(texts)]
            store.write_now(inbox.insert_messages, sent)
            size = {m.id: _size(m) for m in sent}
            seen: list[str] = []
            while True:
                got, more = store.write_now(inbox.take_pending, "a", limit, [], 1, budget)
                if not got:
                    assert not more
                    break
                ids = [m.id for m in got]
                assert len(ids) <= limit
                assert len(ids) == 1 or sum(size[i] for i in ids) <= budget
                seen += ids
                store.write_now(inbox.ack, "a", ids, 2)
                rest = [m.id for m in sent if m.id not in seen]
                assert more == bool(rest)
                if rest and len(ids) < limit:
                    # Cut by the budget: the next message would not have fitted.
                    assert sum(size[i] for i in ids) + size[rest[0]] > budget
            assert seen == [m.id for m in sent]  # in order, each once
        finally:
            store.close()


def test_one_message_larger_than_the_budget_still_comes_alone(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "cone.db", KEY)
    store.write_now(conversations.ensure, "c1", Kind.DM, "peer", Consent.ACCEPTED, 1)
    big = "x" * limits.MESSAGE_MAX_BYTES
    store.write_now(inbox.insert_messages, [_message(0, big), _message(1, big), _message(2, "s")])
    first, more = store.write_now(inbox.take_pending, "a", 1000, [], 1)
    assert [m.text for m in first] == [big] and more
    # Not acknowledged: the same message comes alone again, delivered twice now.
    again, more = store.write_now(inbox.take_pending, "a", 1000, [], 1)
    assert [(m.id, m.deliveries) for m in again] == [(first[0].id, 2)] and more
    store.write_now(inbox.ack, "a", [first[0].id], 2)
    second, more = store.write_now(inbox.take_pending, "a", 1000, [], 1)
    assert [m.text for m in second] == [big] and more
    store.write_now(inbox.ack, "a", [second[0].id], 2)
    third, more = store.write_now(inbox.take_pending, "a", 1000, [], 1)
    assert [m.text for m in third] == ["s"] and not more
    store.close()


def test_peek_is_bounded_by_bytes_too_and_touches_no_receipt(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "cone.db", KEY)
    store.write_now(conversations.ensure, "c1", Kind.DM, "peer", Consent.ACCEPTED, 1)
    big = "x" * limits.MESSAGE_MAX_BYTES
    store.write_now(inbox.insert_messages, [_message(0, big), _message(1, big), _message(2, "s")])
    after, seen = 0, []
    while True:
        batch, more, head = store.read_now(inbox.peek, "", after, 1000)
        assert (
            len(batch) == 1 or sum(len(m.text or "") for m in batch) <= limits.RECEIVE_BATCH_BYTES
        )
        seen += [m.text for m in batch]
        if not more:
            break
        after = batch[-1].seq
    assert seen == [big, big, "s"] and head == after + 1
    # Nothing was delivered by peeking: take_pending still counts its first delivery.
    first, _ = store.write_now(inbox.take_pending, "a", 1000, [], 1)
    assert first[0].deliveries == 1
    store.close()
