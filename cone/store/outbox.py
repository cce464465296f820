"""The outbox: send keys with their first payload and conversation.

A row is written before anything is published. States: `pending` (recorded, maybe
prepared in libxmtp), `failing` (a publication failed; retried at `next_attempt_ns`),
`settled` (published; the key returns its message id forever).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cone.errors import ConeError, FailedPrecondition, unknown_conversation
from cone.store._db import Connection
from cone.store.conversations import get as get_conversation
from cone.store.inbox import ack, skip
from cone.store.records import Consent

_COLUMNS = (
    "key, conversation_id, destination, content_type, payload, message_id, state, attempts,"
    " last_error, next_attempt_ns, created_ns, settled_ns, last_reason"
)


@dataclass(frozen=True)
class OutboxRecord:
    """One send key's record."""

    key: str
    conversation_id: str
    destination: str
    content_type: str
    payload: bytes
    message_id: str | None
    state: str
    attempts: int
    last_error: str | None
    next_attempt_ns: int | None
    created_ns: int
    settled_ns: int | None
    #: The stable reason code of the last failure (`cone.errors`), with `last_error`.
    last_reason: str | None = None


def _record(row: tuple[object, ...]) -> OutboxRecord:
    return OutboxRecord(*row)  # type: ignore[arg-type]  # columns match the fields in order


def get(conn: Connection, key: str) -> OutboxRecord | None:
    """The record for `key`, or None."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE key = ?", (key,)).fetchone()
    return _record(row) if row else None


def claim(
    conn: Connection,
    *,
    key: str,
    conversation_id: str,
    destination: str,
    content_type: str,
    payload: bytes,
    now_ns: int,
    require_accepted: bool,
    ack_consumer: str = "",
    ack_message_ids: Sequence[str] = (),
) -> tuple[OutboxRecord, bool, int]:
    """The key's record, created if new; returns it, whether it is new, and how many
    of `ack_message_ids` this acknowledged for `ack_consumer` (`inbox.ack`, in the same
    transaction: Reply's turn acknowledgement).

    A new key into a conversation that must be accepted is refused unless it is:
    NotFound(unknown_conversation) when cone does not record the conversation,
    FailedPrecondition(not_accepted) when it is a request or blocked. Claim and
    acknowledgement commit together or not at all: a refused claim, or an id that
    is not in the inbox (NotFound, raised by `ack`), rolls the whole write back. A
    key first used for another conversation or content type acknowledges nothing
    (the caller refuses it as a conflict).
    """
    rec = get(conn, key)
    created = rec is None
    if rec is None:
        if require_accepted:
            _refuse_unless_accepted(conn, conversation_id)
        conn.execute(
            "INSERT INTO outbox (key, conversation_id, destination, content_type, payload,"
            " state, created_ns) VALUES (?, ?, ?, ?, ?, 'pending', ?)",
            (key, conversation_id, destination, content_type, payload, now_ns),
        )
        rec = OutboxRecord(
            key, conversation_id, destination, content_type, payload, None, "pending", 0,
            None, None, now_ns, None,
        )  # fmt: skip
    elif (rec.conversation_id, rec.content_type) != (conversation_id, content_type):
        return rec, False, 0  # another message's key: the caller refuses it
    acked = ack(conn, ack_consumer, ack_message_ids, now_ns) if ack_message_ids else 0
    return rec, created, acked


def _refuse_unless_accepted(conn: Connection, conversation_id: str) -> None:
    conv = get_conversation(conn, conversation_id)
    if conv is None:
        raise unknown_conversation(conversation_id)
    if conv.consent is not Consent.ACCEPTED:
        state = "a request" if conv.consent is Consent.REQUESTED else "blocked"
        raise FailedPrecondition(
            f"conversation {conversation_id} is {state}: accept it first "
            "(replying never accepts a request by itself)",
            reason="not_accepted",
            field="conversationId",
        )


def settle(conn: Connection, key: str, message_id: str, now_ns: int) -> None:
    """Mark the key published as `message_id`; ingest, reading the message back from
    libxmtp (its own stream echoes it), finds it already accounted for and writes
    nothing (an own message never enters the inbox)."""
    cur = conn.execute(
        "UPDATE outbox SET state = 'settled', message_id = ?, settled_ns = ?, last_error = NULL,"
        " last_reason = NULL,"
        " next_attempt_ns = NULL, attempts = attempts + 1 WHERE key = ? RETURNING conversation_id",
        (message_id, now_ns, key),
    )
    for (conversation_id,) in cur.fetchall():
        skip(conn, conversation_id, [message_id])


def prepared(conn: Connection, key: str, message_id: str) -> None:
    """Record the message libxmtp prepared for a key not yet published."""
    conn.execute(
        "UPDATE outbox SET message_id = ? WHERE key = ? AND state != 'settled'",
        (message_id, key),
    )


def fail(
    conn: Connection,
    key: str,
    message_id: str | None,
    error: ConeError,
    next_attempt_ns: int,
) -> None:
    """Record a failed attempt (of `message_id`, when prepared), why, and when to retry."""
    conn.execute(
        "UPDATE outbox SET state = 'failing', message_id = coalesce(?, message_id),"
        " attempts = attempts + 1, last_error = ?, last_reason = ?, next_attempt_ns = ?"
        " WHERE key = ?",
        (message_id, error.message, error.reason, next_attempt_ns, key),
    )


def unsettled(conn: Connection) -> list[OutboxRecord]:
    """Every key not yet published, oldest first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM outbox WHERE state != 'settled' ORDER BY created_ns, key"
    ).fetchall()
    return [_record(r) for r in rows]


def by_message_id(conn: Connection, message_id: str) -> bool:
    """Whether this identity's outbox made the message with this id."""
    row = conn.execute("SELECT 1 FROM outbox WHERE message_id = ?", (message_id,)).fetchone()
    return row is not None
