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
from cone.store.records import Consent, Conversation, IncomingMessage

#: The meta key of the dropped count.
DROPPED_KEY: Final = "requests_dropped"

# Each held message's size: the receive budget's measure of its fields, plus its
# attachments' stored bytes (inline data and remote references).
_HELD = f"""
    SELECT count(*), coalesce(sum({inbox.MESSAGE_SIZE} + coalesce((
        SELECT sum(coalesce(length(a.data), 0) + coalesce(octet_length(a.remote_json), 0))
        FROM attachments a WHERE a.message_id = m.id), 0)), 0)
    FROM messages m JOIN conversations c ON c.id = m.conversation_id
    WHERE c.consent != {int(Consent.ACCEPTED)}
"""


def message_bytes(m: IncomingMessage) -> int:
    """What a message counts against the budget: as `_HELD` measures it once stored."""
    fields = (
        m.id,
        m.conversation_id,
        m.sender_inbox_id,
        m.content_type,
        m.text,
        m.data_json,
        m.reply_to,
        m.fallback,
        m.unreadable,
        m.reaction_json,
        m.content_json,
    )
    size = inbox.MESSAGE_OVERHEAD_BYTES + sum(len(f.encode()) for f in fields if f)
    for a in m.attachments:
        size += len(a.data or b"") + len((a.remote_json or "").encode())
    return size


def usage(conn: Connection, sender: str | None = None) -> tuple[int, int]:
    """(messages, bytes) held by requests: those `sender` brought, or all of them."""
    if sender is None:
        count, size = conn.execute(_HELD).fetchone()
    else:
        count, size = conn.execute(_HELD + " AND c.peer_inbox_id = ?", (sender,)).fetchone()
    return int(count), int(size)


def admit(
    conn: Connection, conv: Conversation, rows: Sequence[IncomingMessage], budget: RequestBudget
) -> tuple[list[IncomingMessage], list[str]]:
    """The rows a conversation may store now, in their order, and the ids of those
    dropped (remembered as read and counted). An accepted conversation stores all."""
    if conv.consent is Consent.ACCEPTED or not rows:
        return list(rows), []
    sender_count, sender_size = usage(conn, conv.peer_inbox_id)
    total_count, total_size = usage(conn)
    kept: list[IncomingMessage] = []
    dropped: list[str] = []
    for row in rows:
        size = message_bytes(row)
        if (
            sender_count + 1 > budget.sender_messages
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


__all__ = ["DROPPED_KEY", "admit", "dropped_count", "message_bytes", "usage"]
