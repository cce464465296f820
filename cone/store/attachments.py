"""Attachments of received messages: inline bytes, remote references, downloads.

Every function takes an open connection inside the caller's transaction. Bytes live
in the encrypted store like every other content; a remote attachment's reference
(URL and key material) stays until its bytes are downloaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from cone import limits
from cone.store._db import Connection, limit_clause
from cone.store.records import Consent, StoredAttachment

# The error a remote attachment shows until its first download attempt ends.
NOT_YET = "not downloaded yet"


@dataclass(frozen=True)
class ToFetch:
    """A remote attachment whose bytes cone does not hold yet."""

    message_id: str
    index: int
    remote_json: str
    attempts: int


def size_and_digest(a: StoredAttachment) -> tuple[int | None, str | None]:
    """A file's size and SHA-256 as recorded: from its bytes when inline, else the
    size its remote reference announces and no digest until it is downloaded."""
    if a.data is not None:
        return len(a.data), hashlib.sha256(a.data).hexdigest()
    return a.size, None


def insert(conn: Connection, message_id: str, rows: Iterable[StoredAttachment]) -> None:
    """Record a new message's attachments (inline ones with their size and digest)."""
    for a in rows:
        size, digest = size_and_digest(a)
        conn.execute(
            "INSERT OR IGNORE INTO attachments (message_id, idx, filename, mime_type, size,"
            " sha256, data, remote_json, next_attempt_ns, error)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                message_id,
                a.index,
                a.filename,
                a.mime_type,
                size,
                digest,
                a.data,
                a.remote_json if a.data is None else None,
                0 if a.data is None and a.remote_json is not None else None,
                NOT_YET if a.data is None and a.remote_json is not None else None,
            ),
        )


def for_batch(
    conn: Connection,
    message_ids: Sequence[str],
    budget: int = limits.RECEIVE_INLINE_BUDGET_BYTES,
) -> dict[str, list[StoredAttachment]]:
    """The attachments of a Receive batch, bytes inline while they fit: a file of at
    most `limits.ATTACHMENT_INLINE_MAX_BYTES`, and `budget` bytes of files in all,
    given in the batch's order."""
    out: dict[str, list[StoredAttachment]] = {}
    for mid in message_ids:
        rows = conn.execute(
            "SELECT idx, filename, mime_type, size, sha256, error,"
            " CASE WHEN data IS NOT NULL AND length(data) <= ? THEN data END"
            " FROM attachments WHERE message_id = ? ORDER BY idx",
            (limits.ATTACHMENT_INLINE_MAX_BYTES, mid),
        ).fetchall()
        found = []
        for idx, filename, mime, size, digest, error, data in rows:
            if data is not None and len(data) <= budget:
                budget -= len(data)
            else:
                data = None
            found.append(StoredAttachment(idx, filename, mime, size, digest, data, error))
        if found:
            out[mid] = found
    return out


def get(conn: Connection, message_id: str, index: int) -> StoredAttachment | None:
    """One attachment of a message in Receive's view (accepted conversation, sender not
    blocked), with its bytes when cone holds them; None when there is none."""
    row = conn.execute(
        "SELECT a.idx, a.filename, a.mime_type, a.size, a.sha256, a.data, a.error"
        " FROM attachments a JOIN messages m ON m.id = a.message_id"
        " JOIN conversations c ON c.id = m.conversation_id"
        f" WHERE a.message_id = ? AND a.idx = ? AND c.consent = {int(Consent.ACCEPTED)}"
        "   AND NOT EXISTS (SELECT 1 FROM blocked_inboxes b WHERE b.inbox_id = m.sender_inbox_id)",
        (message_id, index),
    ).fetchone()
    if row is None:
        return None
    return StoredAttachment(row[0], row[1], row[2], row[3], row[4], row[5], row[6])


# Remote attachments waiting for a download, in Receive's view only: a stranger's
# request or a blocked inbox (in any conversation) makes cone fetch nothing, so it
# learns nothing by sending (not that cone is online, nor its address), and a
# request's files cannot reach the disk past the request budget (cone/store/held.py).
# A request's attachments become due when it is accepted.
_WAITING: Final = (
    " FROM attachments a JOIN messages m ON m.id = a.message_id"
    " JOIN conversations c ON c.id = m.conversation_id"
    " WHERE a.data IS NULL AND a.remote_json IS NOT NULL"
    f" AND c.consent = {int(Consent.ACCEPTED)}"
    " AND NOT EXISTS (SELECT 1 FROM blocked_inboxes b WHERE b.inbox_id = m.sender_inbox_id)"
)


def due(conn: Connection, now_ns: int, limit: int = 16) -> list[ToFetch]:
    """Remote attachments to download now (accepted, sender not blocked), oldest due
    first."""
    rows = conn.execute(
        "SELECT a.message_id, a.idx, a.remote_json, a.attempts"
        + _WAITING
        + f" AND a.next_attempt_ns <= ? ORDER BY a.next_attempt_ns {limit_clause(limit)}",
        (now_ns,),
    ).fetchall()
    return [ToFetch(r[0], r[1], r[2], r[3]) for r in rows]


def next_due_ns(conn: Connection) -> int | None:
    """When the next remote attachment is due, or None when none waits (a consent
    change wakes the fetcher: the core's `_notify`)."""
    (value,) = conn.execute("SELECT min(a.next_attempt_ns)" + _WAITING).fetchone()
    return None if value is None else int(value)


def fetched(
    conn: Connection, message_id: str, index: int, data: bytes, filename: str, mime_type: str
) -> None:
    """Keep a downloaded file's bytes, with the name (when the message gave none) and
    MIME type its decrypted payload carries; its reference is no longer needed."""
    conn.execute(
        "UPDATE attachments SET data = ?, size = ?, sha256 = ?, remote_json = NULL, error = NULL,"
        " next_attempt_ns = NULL, mime_type = ?,"
        " filename = CASE WHEN filename = '' THEN ? ELSE filename END"
        " WHERE message_id = ? AND idx = ?",
        (data, len(data), hashlib.sha256(data).hexdigest(), mime_type, filename, message_id, index),
    )


def failed(conn: Connection, message_id: str, index: int, error: str, next_ns: int) -> None:
    """Record why a download failed and when it is tried again."""
    conn.execute(
        "UPDATE attachments SET error = ?, attempts = attempts + 1, next_attempt_ns = ?"
        " WHERE message_id = ? AND idx = ?",
        (error[:300], next_ns, message_id, index),
    )
