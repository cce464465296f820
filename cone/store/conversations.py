"""Conversations, consent, blocked inboxes and contacts.

Every function takes an open connection inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Mapping

from cone.errors import Conflict, unknown_conversation
from cone.store import _acked
from cone.store._db import Connection
from cone.store.records import Consent, ContactRecord, Conversation, Kind, Request

_COLUMNS = "id, type, peer_inbox_id, consent, first_seen_ns, ingested_ns"


def _conversation(row: tuple[object, ...]) -> Conversation:
    return Conversation(
        id=str(row[0]),
        kind=Kind(int(row[1])),  # type: ignore[call-overload]  # sqlite returns int
        peer_inbox_id=str(row[2]),
        consent=Consent(int(row[3])),  # type: ignore[call-overload]
        first_seen_ns=int(row[4]),  # type: ignore[call-overload]
        ingested_ns=int(row[5]),  # type: ignore[call-overload]
    )


def get(conn: Connection, conversation_id: str) -> Conversation | None:
    """The conversation, or None."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    return _conversation(row) if row else None


def require(conn: Connection, conversation_id: str) -> Conversation:
    """The conversation, or NotFound(reason=unknown_conversation)."""
    conv = get(conn, conversation_id)
    if conv is None:
        raise unknown_conversation(conversation_id)
    return conv


def ensure(
    conn: Connection,
    conversation_id: str,
    kind: Kind,
    peer_inbox_id: str,
    consent: Consent,
    now_ns: int,
) -> Conversation:
    """Insert the conversation with `consent` if new; return what is recorded."""
    conn.execute(
        "INSERT OR IGNORE INTO conversations (id, type, peer_inbox_id, consent, first_seen_ns)"
        " VALUES (?, ?, ?, ?, ?)",
        (conversation_id, int(kind), peer_inbox_id, int(consent), now_ns),
    )
    return require(conn, conversation_id)


def accept_own(
    conn: Connection, conversation_id: str, kind: Kind, peer_inbox_id: str, now_ns: int
) -> bool:
    """Record a conversation this identity opens or makes as accepted; returns whether
    it was recorded before as not accepted (a request, or blocked).

    A listing or a stream may have recorded it first, with XMTP's consent of that
    moment (a group made here is unknown to XMTP's consent until cone allows it):
    inserting only when new would leave it a request, its messages held back."""
    conv = get(conn, conversation_id)
    if conv is None:
        ensure(conn, conversation_id, kind, peer_inbox_id, Consent.ACCEPTED, now_ns)
        return False
    if conv.consent is Consent.ACCEPTED:
        return False
    set_consent(conn, conversation_id, Consent.ACCEPTED, now_ns)
    return True


def set_consent(
    conn: Connection, conversation_id: str, consent: Consent, now_ns: int
) -> Conversation:
    """Record consent; blocking a DM also blocks its peer inbox, accepting unblocks it.
    Accepting releases the conversation's messages: they take new inbox sequences
    (`release`), as they become receivable now."""
    conv = require(conn, conversation_id)
    conn.execute("UPDATE conversations SET consent = ? WHERE id = ?", (int(consent), conv.id))
    if consent is Consent.ACCEPTED and conv.consent is not Consent.ACCEPTED:
        release(conn, conv.id)
        # A left group's messages and an unblocked peer's keep their sequences.
        _acked.reset(conn)
    if conv.kind is Kind.DM:
        if consent is Consent.BLOCKED:
            conn.execute(
                "INSERT OR IGNORE INTO blocked_inboxes (inbox_id, blocked_ns) VALUES (?, ?)",
                (conv.peer_inbox_id, now_ns),
            )
        elif consent is Consent.ACCEPTED:
            conn.execute("DELETE FROM blocked_inboxes WHERE inbox_id = ?", (conv.peer_inbox_id,))
    return require(conn, conv.id)


def release(conn: Connection, conversation_id: str) -> int:
    """Give a conversation's messages new inbox sequences after every existing one, in
    their order; returns how many moved.

    The inbox sequence is the order in which messages become receivable: a request's
    messages, stored while it was held, become receivable when it is accepted, so
    whoever follows the inbox by sequence (`peek`, `cone tail`) sees them then. Their
    receipts move with them (acknowledged stays acknowledged). A group this identity
    has left keeps its sequences (its `left_seq` bounds what is delivered).
    """
    left = conn.execute(
        "SELECT left_seq FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if left is None or left[0] is not None:
        return 0
    old = [
        int(row[0])
        for row in conn.execute(
            "SELECT seq FROM messages WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
        )
    ]
    if not old:
        return 0
    # AUTOINCREMENT never reuses a sequence: start above the highest ever given.
    (top,) = conn.execute(
        "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0),"
        " (SELECT coalesce(max(seq), 0) FROM messages))"
    ).fetchone()
    # Receipts point at messages(seq): checked at commit, once both have moved.
    conn.execute("PRAGMA defer_foreign_keys = ON")
    for i, seq in enumerate(old, 1):
        conn.execute("UPDATE messages SET seq = ? WHERE seq = ?", (top + i, seq))
        conn.execute("UPDATE receipts SET seq = ? WHERE seq = ?", (top + i, seq))
    conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'messages'", (top + len(old),))
    return len(old)


def set_ingested(conn: Connection, conversation_id: str, ingested_ns: int) -> None:
    """Record where the next read of libxmtp's messages for a conversation starts.

    Set, not raised: after the wall clock steps back the point moves back with it.
    """
    conn.execute(
        "UPDATE conversations SET ingested_ns = ? WHERE id = ?", (ingested_ns, conversation_id)
    )


def set_ingested_many(conn: Connection, points: Mapping[str, int]) -> None:
    """`set_ingested` for many conversations in one statement."""
    conn.executemany(
        "UPDATE conversations SET ingested_ns = ? WHERE id = ?",
        [(max(0, ns), cid) for cid, ns in points.items()],
    )


def ingested_points(conn: Connection) -> dict[str, int]:
    """Each recorded conversation's read point (`ingested_ns`)."""
    return dict(conn.execute("SELECT id, ingested_ns FROM conversations").fetchall())


def all_conversations(conn: Connection) -> list[Conversation]:
    """Every known conversation."""
    return [_conversation(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM conversations")]


def requests(conn: Connection) -> list[Request]:
    """Conversations held as requests, oldest first, with how many messages wait."""
    rows = conn.execute(
        "SELECT c.id, c.type, c.peer_inbox_id, c.first_seen_ns,"
        " (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id)"
        " FROM conversations c WHERE c.consent = ? ORDER BY c.first_seen_ns, c.id",
        (int(Consent.REQUESTED),),
    ).fetchall()
    return [Request(r[0], Kind(r[1]), r[2], r[3], r[4]) for r in rows]


def save_contact(conn: Connection, contact: ContactRecord) -> ContactRecord:
    """Save or update a contact; a name already used by another inbox is a Conflict."""
    if contact.name is not None:
        row = conn.execute(
            "SELECT inbox_id FROM contacts WHERE name = ?", (contact.name,)
        ).fetchone()
        if row and row[0] != contact.inbox_id:
            raise Conflict(
                f"the contact name {contact.name!r} already belongs to inbox {row[0]}: "
                "choose another name",
                reason="contact_name_taken",
                field="name",
            )
    conn.execute(
        "INSERT INTO contacts (inbox_id, name, address, conversation_id) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (inbox_id) DO UPDATE SET name = coalesce(excluded.name, name),"
        " address = coalesce(excluded.address, address), conversation_id = excluded.conversation_id",
        (contact.inbox_id, contact.name, contact.address, contact.conversation_id),
    )
    row = conn.execute(
        "SELECT inbox_id, name, address, conversation_id FROM contacts WHERE inbox_id = ?",
        (contact.inbox_id,),
    ).fetchone()
    return ContactRecord(row[0], row[1], row[2], row[3])


def contact_by_name(conn: Connection, name: str) -> ContactRecord | None:
    """The contact saved under `name`, or None."""
    row = conn.execute(
        "SELECT inbox_id, name, address, conversation_id FROM contacts WHERE name = ?", (name,)
    ).fetchone()
    return ContactRecord(row[0], row[1], row[2], row[3]) if row else None


def contact_by_address(conn: Connection, address: str) -> ContactRecord | None:
    """The contact saved with `address` (any case), or None."""
    row = conn.execute(
        "SELECT inbox_id, name, address, conversation_id FROM contacts WHERE lower(address) = ?",
        (address.lower(),),
    ).fetchone()
    return ContactRecord(row[0], row[1], row[2], row[3]) if row else None


def contact_names(conn: Connection) -> set[str]:
    """Every saved contact name."""
    return {str(r[0]) for r in conn.execute("SELECT name FROM contacts WHERE name IS NOT NULL")}
