"""What conversations not accepted hold, against `cone.limits.RequestBudget`.

A request (or a blocked conversation) keeps its messages until it is accepted; a
stranger must not fill the disk meanwhile. Its messages count against the inbox that
brought it (`conversations.peer_inbox_id`: a DM's peer, a group's inviter) and
against all requests together. A message that would pass either bound is not stored:
its id is remembered as read (so no read path takes it again) and counted in `meta`
as dropped, for the store's life. Every function runs inside the caller's write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from cone.limits import RequestBudget
from cone.store import inbox, meta
from cone.store._db import Connection
from cone.store.records import Consent, Conversation, StoredMessage

#: The meta key of the dropped count.
DROPPED_KEY: Final = "requests_dropped"

# The messages of conversations not accepted. CROSS JOIN keeps SQLite's order: those
# conversations first, then their messages by index. Led by messages, the sums read
# every accepted message too (115 ms at 100,000 of them, on the store's one thread,
# for each commit of a request's messages).
_HELD = f"""
    FROM conversations c CROSS JOIN messages m ON m.conversation_id = c.id
    WHERE c.consent != {int(Consent.ACCEPTED)}
"""
# Their files, led by the attachments table (small: only messages with files).
_HELD_FILES = f"""
    SELECT coalesce(sum(coalesce(length(a.data), 0) + coalesce(octet_length(a.remote_json), 0)), 0)
    FROM attachments a JOIN messages m ON m.id = a.message_id
    JOIN conversations c ON c.id = m.conversation_id
    WHERE c.consent != {int(Consent.ACCEPTED)}
"""
_BY_SENDER = " AND c.peer_inbox_id = ?"


def message_bytes(m: StoredMessage) -> int:
    """What a message counts against the budget: as `_HELD` measures it once stored."""
    fields = (getattr(m, c) for c in inbox.SIZED)
    size = inbox.MESSAGE_OVERHEAD_BYTES + sum(len(f.encode()) for f in fields if f)
    for a in m.attachments:
        size += len(a.data or b"") + len((a.remote_json or "").encode())
    return size


def count(conn: Connection, sender: str | None = None) -> int:
    """How many messages requests hold: those `sender` brought, or all of them."""
    where, args = (_BY_SENDER, (sender,)) if sender is not None else ("", ())
    (n,) = conn.execute(f"SELECT count(*) {_HELD}{where}", args).fetchone()
    return int(n)


def usage(conn: Connection, sender: str | None = None) -> tuple[int, int]:
    """(messages, bytes) requests hold: those `sender` brought, or all of them; each
    message's bytes as `message_bytes` counts them."""
    where, args = (_BY_SENDER, (sender,)) if sender is not None else ("", ())
    n, size = conn.execute(
        f"SELECT count(*), coalesce(sum({inbox.MESSAGE_SIZE}), 0) {_HELD}{where}", args
    ).fetchone()
    (files,) = conn.execute(_HELD_FILES + where, args).fetchone()
    return int(n), int(size) + int(files)


def admit(
    conn: Connection, conv: Conversation, rows: Sequence[StoredMessage], budget: RequestBudget
) -> tuple[list[StoredMessage], list[str]]:
    """The rows a conversation may store now, in their order, and the ids of those
    dropped (remembered as read and counted). An accepted conversation stores all."""
    if conv.consent is Consent.ACCEPTED or not rows:
        return list(rows), []
    sender_count, sender_size = usage(conn, conv.peer_inbox_id)  # at most its budget
    # Counting is cheap; the bytes of all requests are summed only when one may enter.
    full = sender_count >= budget.sender_messages or count(conn) >= budget.total_messages
    total_count, total_size = (0, 0) if full else usage(conn)
    kept: list[StoredMessage] = []
    dropped: list[str] = []
    for row in rows:
        size = message_bytes(row)
        if (
            full
            or sender_count + 1 > budget.sender_messages
            or total_count + 1 > budget.total_messages
            or sender_size + size > budget.sender_bytes
            or total_size + size > budget.total_bytes
        ):
            # Once over, the rest stays over too: what is kept is a prefix, in order.
            dropped += [r.id for r in rows[len(kept) :]]
            break
        kept.append(row)
        sender_count += 1
        total_count += 1
        sender_size += size
        total_size += size
    if dropped:
        inbox.skip(conn, conv.id, dropped)
        meta.put(conn, DROPPED_KEY, str(dropped_count(conn) + len(dropped)).encode())
    return kept, dropped


def dropped_count(conn: Connection) -> int:
    """How many messages of requests were dropped over the budget, over the store's life."""
    value = meta.get(conn, DROPPED_KEY)
    return int(value) if value else 0


__all__ = ["DROPPED_KEY", "admit", "count", "dropped_count", "message_bytes", "usage"]
