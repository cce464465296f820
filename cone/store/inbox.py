"""Inbox, receipts and consumers: the queries behind Receive and Ack.

Every function takes an open connection inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from enum import Enum
from typing import Any, Final, get_args, get_type_hints

from cone import limits
from cone.errors import NotFound
from cone.store import _acked, attachments
from cone.store._db import Connection, limit_clause
from cone.store.records import (
    MESSAGE_COLUMNS,
    STORE_ONLY_FIELDS,
    Consent,
    Kind,
    StoredAttachment,
    StoredMessage,
)

# Pending for a consumer: in an accepted conversation, not from a blocked inbox,
# not acknowledged by that consumer, not deleted or expired before this consumer
# was handed it, not taken in after this identity left its group. The receipt row
# (if any) comes along for its delivery count.
_PENDING = f"""
    FROM messages m
    JOIN conversations c ON c.id = m.conversation_id
    LEFT JOIN receipts r ON r.consumer = :consumer AND r.seq = m.seq
    WHERE c.consent = {int(Consent.ACCEPTED)}
      AND r.acked_ns IS NULL
      AND (m.removed IS NULL OR r.deliveries > 0)
      AND (c.left_seq IS NULL OR m.seq <= c.left_seq)
      AND NOT EXISTS (SELECT 1 FROM blocked_inboxes b WHERE b.inbox_id = m.sender_inbox_id)
"""

# A message's size for the receive budget: every text it carries to a consumer (each
# text column of the record but those never handed out) as UTF-8 bytes, plus room for
# the field names, numbers and time that travel with it.
MESSAGE_OVERHEAD_BYTES: Final = 256
_HINTS: Final = get_type_hints(StoredMessage)
SIZED: Final = tuple(
    c for c in MESSAGE_COLUMNS if _HINTS[c] in (str, str | None) and c not in STORE_ONLY_FIELDS
)
MESSAGE_SIZE: Final = (
    f"({MESSAGE_OVERHEAD_BYTES} + "
    + " + ".join(f"coalesce(octet_length(m.{c}), 0)" for c in SIZED)
    + ")"
)
# The columns ingest writes: all of the record's but the inbox's order, which it gives.
_INSERT: Final = tuple(c for c in MESSAGE_COLUMNS if c != "seq")
_INSERT_SQL: Final = (
    f"INSERT OR IGNORE INTO messages ({', '.join(_INSERT)})"
    f" VALUES ({', '.join('?' * len(_INSERT))})"
)


def insert_messages(conn: Connection, messages: Iterable[StoredMessage]) -> list[str]:
    """Insert messages not yet in the inbox; returns the ids that were new.

    A repeat of an XMTP id is dropped; so is a repeat of a (sender, send key) pair,
    whose id is remembered as skipped.
    """
    new: list[str] = []
    for m in messages:
        cur = conn.execute(_INSERT_SQL, [getattr(m, c) for c in _INSERT])
        if cur.rowcount:
            new.append(m.id)
            attachments.insert(conn, m.id, m.attachments)
        elif not known_ids(conn, [m.id]):
            skip(conn, m.conversation_id, [m.id])
    return new


def skip(conn: Connection, conversation_id: str, message_ids: Iterable[str]) -> None:
    """Remember ids read from libxmtp that are not delivered (own, protocol-only, repeats)."""
    conn.executemany(
        "INSERT OR IGNORE INTO ingest_skipped (id, conversation_id) VALUES (?, ?)",
        [(mid, conversation_id) for mid in message_ids],
    )


def known_ids(conn: Connection, message_ids: Sequence[str]) -> set[str]:
    """Which of these ids cone has already read (delivered or skipped)."""
    out: set[str] = set()
    for i in range(0, len(message_ids), 500):
        chunk = list(message_ids[i : i + 500])
        marks = ", ".join("?" * len(chunk))
        for table in ("messages", "ingest_skipped"):
            rows = conn.execute(f"SELECT id FROM {table} WHERE id IN ({marks})", chunk)
            out.update(r[0] for r in rows)
    return out


def known_in(conn: Connection, conversation_id: str, at_most: int) -> set[str] | None:
    """Every id cone has read in a conversation (delivered or skipped), or None when
    there are more than `at_most`: read along the conversation's indexes, which for a
    whole conversation costs a fraction of looking its ids up one by one."""
    out: set[str] = set()
    for sql in (
        "SELECT id FROM messages WHERE conversation_id = ?",
        "SELECT id FROM ingest_skipped WHERE conversation_id = ?",
    ):
        out.update(
            r[0] for r in conn.execute(f"{sql} {limit_clause(at_most + 1)}", (conversation_id,))
        )
        if len(out) > at_most:
            return None
    return out


def known_count(conn: Connection, conversation_id: str) -> int:
    """How many of a conversation's message ids cone has read (delivered or skipped)."""
    (a,) = conn.execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    (b,) = conn.execute(
        "SELECT count(*) FROM ingest_skipped WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    return int(a) + int(b)


def head(conn: Connection) -> int:
    """The latest inbox sequence number (0 when the inbox is empty)."""
    (seq,) = conn.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()
    return int(seq)


def touch_consumer(conn: Connection, consumer: str, now_ns: int) -> None:
    """Record that a consumer exists (for status)."""
    conn.execute(
        "INSERT OR IGNORE INTO consumers (name, created_ns) VALUES (?, ?)", (consumer, now_ns)
    )


def take_pending(
    conn: Connection,
    consumer: str,
    limit: int,
    exclude: Sequence[str],
    now_ns: int,
    max_bytes: int = limits.RECEIVE_BATCH_BYTES,
    after_seq: int = 0,
) -> tuple[list[StoredMessage], bool]:
    """The oldest pending messages, their delivery counts raised; and `more`.

    At most `limit` messages, and no more than fit in `max_bytes` by `MESSAGE_SIZE`,
    except that the first message always comes (a message larger than the budget is
    a batch of its own). `more` says whether pending messages were left out. Only
    messages after `after_seq` are looked at (a range of the primary key): for a
    caller that knows nothing up to it is pending.
    """
    touch_consumer(conn, consumer, now_ns)
    through = _advance(conn, consumer)  # a pass after an upgrade or an unblock; then a lookup
    params: dict[str, object] = {"consumer": consumer, "through": max(after_seq, through)}
    exclusion = " AND m.seq > :through"
    if exclude:
        names = [f":x{i}" for i in range(len(exclude))]
        params.update({f"x{i}": cid for i, cid in enumerate(exclude)})
        exclusion += f" AND m.conversation_id NOT IN ({', '.join(names)})"
    taken, more, last, total = _fitting(conn, f"{_PENDING}{exclusion}", params, limit, max_bytes)
    if not taken:
        return [], more
    # The rows `_fitting` counted, and only those: the same filter up to the last one.
    rows = conn.execute(
        f"SELECT {_row('coalesce(r.deliveries, 0) + 1')}"
        f" {_PENDING}{exclusion} AND m.seq <= :last ORDER BY m.seq",
        {**params, "last": last},
    ).fetchall()
    # One statement for the whole batch; the store's single writer makes the counts exact.
    conn.executemany(
        "INSERT INTO receipts (consumer, seq, deliveries) VALUES (?, ?, ?)"
        " ON CONFLICT (consumer, seq) DO UPDATE SET deliveries = excluded.deliveries",
        [(consumer, row[_SEQ], row[_DELIVERIES]) for row in rows],
    )
    return _stored_batch(conn, rows, total), more


#: The names of a message row's values, in order: the record's columns, then what a
#: read adds from the conversation and the consumer's receipt.
ROW_NAMES: Final = (*MESSAGE_COLUMNS, "kind", "deliveries")
_SEQ, _ID, _DELIVERIES = (ROW_NAMES.index(n) for n in ("seq", "id", "deliveries"))
_FILES = ROW_NAMES.index("attachments_kind")


def _row(deliveries: str) -> str:
    """The select list of a message row (`ROW_NAMES`), the delivery count given."""
    return ", ".join((*(f"m.{c}" for c in MESSAGE_COLUMNS), "c.type", deliveries))


def _enum(hint: Any) -> Any:
    """The enum a field's type names (`Kind | None`: Kind), or None."""
    for t in (hint, *get_args(hint)):
        if isinstance(t, type) and issubclass(t, Enum):
            return t
    return None


# The fields read as an enum from their column's value, each with its members by value
# (a lookup: calling the enum costs ten times as much).
_ENUMS: Final = tuple(
    (n, {m.value: m for m in enum}) for n in ROW_NAMES if (enum := _enum(_HINTS[n])) is not None
)


def _fitting(
    conn: Connection, source: str, params: dict[str, object], limit: int, max_bytes: int
) -> tuple[int, bool, int, int]:
    """How many of the first `limit` rows of `source` fit `max_bytes` (at least one),
    whether any were left out, the last seq taken and the bytes taken. Sizes first:
    octet_length reads no content, so only the batch's content is read afterwards."""
    sizes = conn.execute(
        f"SELECT m.seq, {MESSAGE_SIZE} {source} ORDER BY m.seq {limit_clause(limit + 1)}",
        params,
    ).fetchall()
    taken, total = 0, 0
    for _seq, size in sizes[:limit]:
        if taken and total + size > max_bytes:
            break
        taken += 1
        total += size
    return taken, len(sizes) > taken, sizes[taken - 1][0] if taken else 0, total


def peek(
    conn: Connection,
    consumer: str,
    after_seq: int,
    limit: int,
    max_bytes: int = limits.RECEIVE_BATCH_BYTES,
) -> tuple[list[StoredMessage], bool, int]:
    """Accepted messages after `after_seq` (only those `consumer` has not acknowledged,
    when given; every one when empty), their receipts untouched; `more`; the head.
    Bounded by count and bytes as `take_pending` is."""
    params: dict[str, object] = {
        "consumer": consumer,
        "after": max(after_seq, _acked.through(conn, consumer)),
    }
    source = f"{_PENDING} AND m.seq > :after"
    taken, more, last, total = _fitting(conn, source, params, limit, max_bytes)
    (head,) = conn.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()
    if not taken:
        return [], more, int(head)
    rows = conn.execute(
        f"SELECT {_row('coalesce(r.deliveries, 0)')} {source} AND m.seq <= :last ORDER BY m.seq",
        {**params, "last": last},
    ).fetchall()
    return _stored_batch(conn, rows, total), more, int(head)


def _stored_batch(conn: Connection, rows: list[Any], message_bytes: int) -> list[StoredMessage]:
    """The batch's messages with their attachments, whose bytes come inline while they
    fit what the batch's budget leaves (the rest is fetched with `attachment`)."""
    budget = max(
        0, min(limits.RECEIVE_INLINE_BUDGET_BYTES, limits.RECEIVE_BATCH_BYTES - message_bytes)
    )
    ids = [row[_ID] for row in rows if row[_FILES] is not None]
    files = attachments.for_batch(conn, ids, budget)
    return [_stored(row, tuple(files.get(row[_ID], ()))) for row in rows]


def _stored(row: Any, files: tuple[StoredAttachment, ...]) -> StoredMessage:
    """The record of a message row (`ROW_NAMES`), each value by its column's name."""
    values = dict(zip(ROW_NAMES, row, strict=True))
    for name, members in _ENUMS:
        value = values[name]
        if value is not None:
            values[name] = members[value]
    return StoredMessage(**values, attachments=files)


#: A message row as Receive hands it out without counting a delivery (deliveries 0),
#: from `messages m JOIN conversations c`; `records` maps such rows.
ROW: Final = _row("0")


def records(conn: Connection, rows: list[Any]) -> list[StoredMessage]:
    """Rows of `ROW` as Receive hands them out, without touching a receipt, attachment
    bytes inline as a Receive batch gives them (at most
    `limits.RECEIVE_INLINE_BUDGET_BYTES` in all, in the order of the rows)."""
    return _stored_batch(conn, rows, 0)


def as_stored(m: StoredMessage, kind: Kind, *, own: bool, budget: int) -> StoredMessage:
    """A message that is not in the inbox (this identity's own, decoded from the
    outbox) as the inbox would hand it out: files with their size and digest as
    `attachments.insert` records them, bytes inline as `for_batch` gives them (each
    file at most `limits.ATTACHMENT_INLINE_MAX_BYTES`, `budget` in all)."""
    files = []
    for a in m.attachments:
        size, digest = attachments.size_and_digest(a)
        inline = a.data
        if inline is not None and len(inline) <= min(limits.ATTACHMENT_INLINE_MAX_BYTES, budget):
            budget -= len(inline)
        else:
            inline = None
        files.append(StoredAttachment(a.index, a.filename, a.mime_type, size, digest, inline))
    return replace(m, kind=kind, own=own, attachments=tuple(files))


def ack(conn: Connection, consumer: str, message_ids: Sequence[str], now_ns: int) -> int:
    """Acknowledge ids for a consumer; all or nothing. Returns how many are acknowledged."""
    unique = list(dict.fromkeys(message_ids))
    seqs: dict[str, int] = {}
    for i in range(0, len(unique), 500):
        chunk = unique[i : i + 500]
        marks = ", ".join("?" * len(chunk))
        for mid, seq in conn.execute(
            f"SELECT id, seq FROM messages WHERE id IN ({marks})", chunk
        ).fetchall():
            seqs[mid] = seq
    missing = [mid for mid in unique if mid not in seqs]
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise NotFound(
            f"{len(missing)} message id(s) are not in the inbox: {shown}",
            reason="unknown_message",
            field="messageIds",
        )
    conn.executemany(
        "INSERT INTO receipts (consumer, seq, acked_ns) VALUES (?, ?, ?)"
        " ON CONFLICT (consumer, seq) DO UPDATE SET acked_ns = coalesce(acked_ns, excluded.acked_ns)",
        [(consumer, seqs[mid], now_ns) for mid in unique],
    )
    _advance(conn, consumer)
    return len(unique)


def _advance(conn: Connection, consumer: str) -> int:
    """Move the consumer's acknowledged point up to its first pending message, and
    return the point: reads only the sequences between the old point and it."""
    was = _acked.through(conn, consumer)
    row = conn.execute(
        f"SELECT m.seq {_PENDING} AND m.seq > :through ORDER BY m.seq LIMIT 1",
        {"consumer": consumer, "through": was},
    ).fetchone()
    return _acked.advance(conn, consumer, None if row is None else int(row[0]), was)


def pending_counts(conn: Connection) -> list[tuple[str, int]]:
    """Pending messages per known consumer."""
    out = []
    for (name,) in conn.execute("SELECT name FROM consumers ORDER BY name").fetchall():
        (n,) = conn.execute(
            f"SELECT count(*) {_PENDING} AND m.seq > :through",
            {"consumer": name, "through": _acked.through(conn, name)},
        ).fetchone()
        out.append((name, int(n)))
    return out


def pending_in(conn: Connection, consumer: str, conversation_id: str, through: int) -> int:
    """Pending messages of one conversation for a consumer, as Receive counts them:
    only past `through`, the consumer's acknowledged point (`_acked.through`)."""
    (n,) = conn.execute(
        f"SELECT count(*) {_PENDING} AND m.conversation_id = :cid AND m.seq > :through",
        {"consumer": consumer, "cid": conversation_id, "through": through},
    ).fetchone()
    return int(n)


def message_count(conn: Connection) -> int:
    """Messages in the inbox."""
    (n,) = conn.execute("SELECT count(*) FROM messages").fetchone()
    return int(n)


def sender_of(conn: Connection, message_id: str) -> str | None:
    """The sender inbox of a message in the inbox, or None when it is not there."""
    row = conn.execute(
        "SELECT sender_inbox_id FROM messages WHERE id = ?", (message_id,)
    ).fetchone()
    return None if row is None else str(row[0])
