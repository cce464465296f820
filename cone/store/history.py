"""History: conversation listings, a conversation's messages, contacts, unblocking.

Reading here never changes a receipt. Every function takes an open connection inside
the caller's transaction (or a read).

History order is a total order that never changes once a message is stored: the
sender's sent time, then the message id. Inbox messages and this identity's own
messages (the outbox's published keys) are merged in that order; an own message is
placed at the time cone first took its key.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from cone.errors import FailedPrecondition, InvalidArgument, NotFound
from cone.store import _acked, details, inbox
from cone.store._db import Connection, limit_clause
from cone.store.conversations import require
from cone.store.details import KnownDetails
from cone.store.records import (
    Consent,
    ContactRecord,
    Conversation,
    Kind,
    OwnMessage,
    Removed,
    Request,
    StoredMessage,
)


@dataclass(frozen=True)
class ConversationRow:
    """One conversation of a listing, with what cone's store knows of it."""

    conversation: Conversation
    contact_name: str | None
    contact_address: str | None
    last_message_ns: int | None
    pending: int
    left: bool
    # libxmtp's details as cone last read them (cone/store/details.py): None when
    # never read or a group update came in since; `changes` is what a read records.
    details: KnownDetails | None
    changes: int


# A page is two range reads, each bounded, ordered and limited on its own index:
# inbox rows (as Receive hands them out) and own rows (the outbox's published keys),
# each read whole; the page is their merge. Expired messages are gone from history.
_INBOX = (
    f"SELECT {inbox.ROW} FROM messages m JOIN conversations c ON c.id = m.conversation_id"
    f" WHERE m.conversation_id = :cid AND (m.removed IS NULL OR m.removed != '{Removed.EXPIRED}')"
    " {bounds} ORDER BY m.sent_at_ns {order}, m.id {order} {limit}"
)
_OWN = (
    "SELECT created_ns, message_id, payload FROM outbox"
    " WHERE conversation_id = :cid AND message_id IS NOT NULL AND expired_ns IS NULL"
    " {bounds} ORDER BY created_ns {order}, message_id {order} {limit}"
)
# Where inbox.ROW keeps a message's id and sent time (its history position).
_ID, _SENT = inbox.ROW_NAMES.index("id"), inbox.ROW_NAMES.index("sent_at_ns")


def _bounded(
    template: str, time_column: str, id_column: str, bounds: list[str], order: str, rows: int
) -> str:
    where = "".join(f" AND ({time_column}, {id_column}) {b}" for b in bounds)
    return template.format(bounds=where, order=order, limit=limit_clause(rows))


def _position(conn: Connection, conversation_id: str, message_id: str, field: str) -> int:
    """The sent time of a message of this conversation's history (for a cursor)."""
    row = conn.execute(
        "SELECT sent_at_ns FROM messages WHERE id = ? AND conversation_id = ?",
        (message_id, conversation_id),
    ).fetchone()
    if row is None:
        # By message id: the conversation's own index would scan all its own messages.
        row = conn.execute(
            "SELECT created_ns FROM outbox INDEXED BY outbox_by_message"
            " WHERE message_id = ? AND conversation_id = ?",
            (message_id, conversation_id),
        ).fetchone()
    if row is None:
        raise NotFound(
            f"message {message_id} is not in the history of conversation {conversation_id}",
            reason="unknown_message",
            field=field,
        )
    return int(row[0])


def messages(
    conn: Connection,
    *,
    conversation_id: str,
    before: str | None,
    after: str | None,
    limit: int,
    oldest_first: bool,
) -> tuple[list[StoredMessage | OwnMessage], bool]:
    """A page of an accepted conversation's history and whether more lie beyond it:
    inbox messages as Receive hands them out (no receipt touched), own messages as the
    outbox keeps them (the core decodes them into the same record)."""
    conv = require(conn, conversation_id)
    if conv.consent is not Consent.ACCEPTED:
        state = "a request" if conv.consent is Consent.REQUESTED else "blocked"
        raise FailedPrecondition(
            f"conversation {conversation_id} is {state}: its content is shown once accepted",
            reason="not_accepted",
            field="conversationId",
        )
    params: dict[str, object] = {"cid": conversation_id}
    bounds = []
    if after is not None:
        params["at"], params["aid"] = _position(conn, conversation_id, after, "after"), after
        bounds.append("> (:at, :aid)")
    if before is not None:
        params["bt"], params["bid"] = _position(conn, conversation_id, before, "before"), before
        bounds.append("< (:bt, :bid)")
    order = "ASC" if oldest_first else "DESC"
    received = conn.execute(
        _bounded(_INBOX, "m.sent_at_ns", "m.id", bounds, order, limit + 1), params
    ).fetchall()
    sent = conn.execute(
        _bounded(_OWN, "created_ns", "message_id", bounds, order, limit + 1), params
    ).fetchall()
    # (position, own, row), in the page's order; the first limit + 1 of both sides.
    merged = heapq.merge(
        (((r[_SENT], r[_ID]), False, r) for r in received),
        (((r[0], r[1]), True, r) for r in sent),
        key=lambda entry: entry[0],
        reverse=not oldest_first,
    )
    page = list(itertools.islice(merged, limit + 1))
    more = len(page) > limit
    del page[limit:]
    stored = iter(inbox.records(conn, [row for _, own, row in page if not own]))
    return [
        OwnMessage(row[1], conv.id, conv.kind, row[0], bytes(row[2])) if own else next(stored)
        for _, own, row in page
    ], more


def request_preview(conn: Connection, conversation_id: str) -> tuple[Request, StoredMessage | None]:
    """A request and its first message (the earliest sent), for an operator to look at
    before accepting it: read as history is, so no receipt moves and no consumer gets
    it. FailedPrecondition (`not_a_request`) for an accepted or blocked conversation."""
    conv = require(conn, conversation_id)
    if conv.consent is not Consent.REQUESTED:
        state = "accepted" if conv.consent is Consent.ACCEPTED else "blocked"
        raise FailedPrecondition(
            f"conversation {conversation_id} is {state}, not a request",
            reason="not_a_request",
            field="conversationId",
        )
    (waiting,) = conn.execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    request = Request(conv.id, conv.kind, conv.peer_inbox_id, conv.first_seen_ns, int(waiting))
    first = conn.execute(
        _bounded(_INBOX, "m.sent_at_ns", "m.id", [], "ASC", 1), {"cid": conversation_id}
    ).fetchall()
    return request, next(iter(inbox.records(conn, first)), None)


def _cursor(activity_ns: int, conversation_id: str) -> str:
    return f"{activity_ns}.{conversation_id}"


def _parse_cursor(cursor: str) -> tuple[int, str]:
    ns, _, cid = cursor.partition(".")
    if not ns.isdigit() or not cid or len(cid) > 128:
        raise InvalidArgument("cursor is not one this method returned", field="cursor")
    return int(ns), cid


def conversations(
    conn: Connection,
    *,
    consumer: str,
    consent: Consent | None,
    kind: Kind | None,
    limit: int,
    cursor: str | None,
    only: str | None = None,
) -> tuple[list[ConversationRow], str | None]:
    """A page of conversations by last activity, most recent first (`activity_ns`: the
    latest of when cone first saw it, its newest message taken in and its newest own
    message; then the id), and the cursor of the next page (None at the end). A
    conversation active since an earlier page moves above the cursor: later pages do
    not repeat it. `only` picks one conversation by id."""
    where: list[str] = []
    params: dict[str, object] = {}
    if only is not None:
        where.append("c.id = :only")
        params["only"] = only
    if consent is not None:
        where.append("c.consent = :consent")
        params["consent"] = int(consent)
    if kind is not None:
        where.append("c.type = :kind")
        params["kind"] = int(kind)
    if cursor is not None:
        params["ans"], params["aid"] = _parse_cursor(cursor)
        where.append("(c.activity_ns, c.id) < (:ans, :aid)")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(
        "SELECT c.id, c.type, c.peer_inbox_id, c.consent, c.first_seen_ns, c.ingested_ns,"
        f" k.name, k.address, c.left_seq, c.activity_ns, {details.COLUMNS} FROM conversations c"
        " LEFT JOIN contacts k ON c.type = 1 AND k.conversation_id = c.id"
        " LEFT JOIN details d ON d.conversation_id = c.id"
        f"{clause} ORDER BY c.activity_ns DESC, c.id DESC {limit_clause(limit + 1)}",
        params,
    ).fetchall()
    page = rows[:limit]
    through = _acked.through(conn, consumer)
    out = []
    for r in page:
        conv = Conversation(r[0], Kind(r[1]), r[2], Consent(r[3]), r[4], r[5])
        changes, known = details.from_row(r[10:])
        out.append(
            ConversationRow(
                conversation=conv,
                contact_name=r[6],
                contact_address=r[7],
                last_message_ns=_last_message_ns(conn, conv.id),
                pending=_pending(conn, conv, consumer, through),
                left=r[8] is not None,
                details=known,
                changes=changes,
            )
        )
    next_cursor = _cursor(page[-1][9], page[-1][0]) if len(rows) > limit and page else None
    return out, next_cursor


def _last_message_ns(conn: Connection, conversation_id: str) -> int | None:
    (inbound,) = conn.execute(
        "SELECT max(sent_at_ns) FROM messages WHERE conversation_id = ?"
        f" AND (removed IS NULL OR removed != '{Removed.EXPIRED}')",
        (conversation_id,),
    ).fetchone()
    (own,) = conn.execute(
        "SELECT max(created_ns) FROM outbox WHERE conversation_id = ? AND message_id IS NOT NULL"
        " AND expired_ns IS NULL",
        (conversation_id,),
    ).fetchone()
    times = [t for t in (inbound, own) if t is not None]
    return max(times) if times else None


def _pending(conn: Connection, conv: Conversation, consumer: str, through: int) -> int:
    """Pending for the consumer as Receive counts it (store.inbox): only past the
    consumer's acknowledged point `through` (a long conversation's acknowledged
    history is not read again)."""
    if conv.consent is not Consent.ACCEPTED:
        return 0  # none: no query
    return inbox.pending_in(conn, consumer, conv.id, through)


def contacts(conn: Connection) -> list[ContactRecord]:
    """Every saved contact, named ones first by name, then by inbox id."""
    rows = conn.execute(
        "SELECT inbox_id, name, address, conversation_id FROM contacts"
        " ORDER BY name IS NULL, name, inbox_id"
    ).fetchall()
    return [ContactRecord(r[0], r[1], r[2], r[3]) for r in rows]


def unblock(conn: Connection, conversation_id: str) -> Conversation:
    """A blocked conversation becomes a request again; a DM's peer inbox is unblocked.

    A request stays as it is; an accepted conversation is FailedPrecondition(not_blocked).
    """
    conv = require(conn, conversation_id)
    if conv.consent is Consent.ACCEPTED:
        raise FailedPrecondition(
            f"conversation {conversation_id} is accepted, not blocked: block it first, "
            "or leave it as it is",
            reason="not_blocked",
            field="conversationId",
        )
    conn.execute(
        "UPDATE conversations SET consent = ? WHERE id = ?", (int(Consent.REQUESTED), conv.id)
    )
    if conv.kind is Kind.DM:
        conn.execute("DELETE FROM blocked_inboxes WHERE inbox_id = ?", (conv.peer_inbox_id,))
        _acked.reset(conn)  # its messages elsewhere are receivable again
    return require(conn, conv.id)
