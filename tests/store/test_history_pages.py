"""History pages on the real store: inbox and own messages merged in one total order,
walked in pages both ways, ties on time broken by id, expired ones left out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cone.store import (
    Connection,
    Consent,
    Kind,
    OwnMessage,
    Store,
    StoredMessage,
    conversations,
    history,
    inbox,
)

KEY = bytes(range(32))
CID = "c1"


def _fill(conn: Connection) -> list[str]:
    """40 messages, every third one own; times repeat in pairs, so inbox and own
    messages tie on time. Returns the ids in history order (time, then id)."""
    order: list[tuple[int, str]] = []
    received = []
    for i in range(40):
        t, mid = 1_000 + i // 2, f"{(i * 7) % 40:04d}"
        if i % 3 == 2:
            conn.execute(
                "INSERT INTO outbox (key, conversation_id, destination, content_type, payload,"
                " message_id, state, created_ns, settled_ns, expired_ns)"
                " VALUES (?, ?, ?, 'xmtp.org/text:1.0', x'', ?, 'settled', ?, 0, ?)",
                (f"k{i}", CID, CID, mid, t, 5 if i == 20 else None),
            )
        else:
            received.append(StoredMessage(mid, CID, "peer", t, "xmtp.org/text:1.0", text=f"m{i}"))
        if i != 20:  # expired: not in history
            order.append((t, mid))
    inbox.insert_messages(conn, received)
    return [mid for _, mid in sorted(order)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "cone.db", KEY)
    s.write_now(conversations.ensure, CID, Kind.DM, "peer", Consent.ACCEPTED, 1)
    yield s
    s.close()


def _walk(store: Store, limit: int, oldest_first: bool) -> list[OwnMessage | str]:
    found: list[OwnMessage | str] = []
    cursor: str | None = None
    while True:
        page, more = store.read_now(
            history.messages,
            conversation_id=CID,
            after=cursor if oldest_first else None,
            before=None if oldest_first else cursor,
            limit=limit,
            oldest_first=oldest_first,
        )
        assert len(page) <= limit and (not more or len(page) == limit)
        found += [m if isinstance(m, OwnMessage) else m.id for m in page]
        if not more:
            return found
        cursor = page[-1].id


@pytest.mark.parametrize("limit", [1, 3, 7, 39, 100])
def test_pages_walk_the_one_order_both_ways_without_gap_or_repeat(store: Store, limit: int) -> None:
    expected = store.write_now(_fill)
    forward = _walk(store, limit, oldest_first=True)
    backward = _walk(store, limit, oldest_first=False)
    ids = [m.id if isinstance(m, OwnMessage) else m for m in forward]
    assert ids == expected
    assert [m.id if isinstance(m, OwnMessage) else m for m in backward] == expected[::-1]
    own = [m for m in forward if isinstance(m, OwnMessage)]
    assert len(own) == 12 and all(m.kind is Kind.DM and m.conversation_id == CID for m in own)


def test_a_window_between_two_cursors_and_an_own_message_as_cursor(store: Store) -> None:
    expected = store.write_now(_fill)
    own_id = "0014"  # i = 2: an own message
    assert own_id in expected
    start, end = expected.index(own_id), expected.index(expected[30])
    page, more = store.read_now(
        history.messages,
        conversation_id=CID,
        after=own_id,
        before=expected[30],
        limit=100,
        oldest_first=True,
    )
    assert [m.id for m in page] == expected[start + 1 : end] and not more
