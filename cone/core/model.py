"""What the core hands out: the types the daemon's servicer converts, and nothing else.

One message type serves Receive, Peek and Messages. The store hands out one record
for every message it holds (`StoredMessage`); `message_of` is the one mapping from it
to `Message`. An own message in history is read back from the outbox and decoded by
the same mapping ingest uses (`arrivals.record`), then made the record the inbox would
hand out for it (`inbox.as_stored`), so it comes out of `message_of` too: whatever
`receive` shows of a message, `messages` shows the same.

The stored encodings (`AttachmentsKind`, `Removed`) end here: a `Message` carries the
one file or the list as the wire does, and `deleted`/`expired` as flags. The enums
and records below that come from the store and the engine (consent, kinds, contacts,
members, stream health, a file's `Attachment`) are plain values; the core re-exports
them so that the servicer imports the core alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from cone.core import content
from cone.core.content import Reaction, ReactionAction, ReactionSchema
from cone.core.intake.arrivals import record
from cone.engine.port import Member, Role, StreamHealth
from cone.store import (
    AttachmentsKind,
    Consent,
    ContactRecord,
    Kind,
    OwnMessage,
    Removed,
    Request,
    StoredAttachment,
    StoredMessage,
    inbox,
)
from cone.store.outbox import OutboxRecord

#: One file of a message, as the store reads it (`data` None when it is not handed
#: out inline: too large for the batch, or a remote file not downloaded yet, see
#: `error`); the core hands it out unchanged.
Attachment = StoredAttachment


@dataclass(frozen=True)
class Message:
    """One message, as Receive, Peek and Messages hand it out.

    `deliveries` is the only field that depends on who asks: how often Receive has
    handed it to that consumer (0 from Peek and Messages, which count nothing)."""

    id: str
    conversation_id: str
    kind: Kind
    sender_inbox_id: str
    sent_at_ns: int
    content_type: str
    sequence: int  # 0 for an own message (it is not in the inbox)
    deliveries: int
    text: str | None = None
    data_json: str | None = None
    reply_to: str | None = None
    fallback: str | None = None
    unreadable: str | None = None
    reaction: Reaction | None = None
    content_json: str | None = None
    attachment: Attachment | None = None  # one file (attachment, remote attachment)
    attachments: tuple[Attachment, ...] = ()  # a list (multi remote attachment)
    own: bool = False
    deleted: bool = False
    expired: bool = False


def _reaction(reaction_json: str) -> Reaction:
    r = json.loads(reaction_json)
    return Reaction(
        message_id=r["messageId"],
        emoji=r["emoji"],
        action=ReactionAction(r["action"]),
        schema=ReactionSchema(r["schema"]),
        reference_inbox_id=r.get("referenceInboxId") or "",
    )


def message_of(m: StoredMessage) -> Message:
    """The one mapping from the store's record to the core's message."""
    files = m.attachments  # the stored files, shared, not copied
    return Message(
        id=m.id,
        conversation_id=m.conversation_id,
        kind=m.kind,
        sender_inbox_id=m.sender_inbox_id,
        sent_at_ns=m.sent_at_ns,
        content_type=m.content_type,
        sequence=m.seq,
        deliveries=m.deliveries,
        # One content at most, as the wire's oneof.
        text=m.text,
        data_json=m.data_json if m.text is None else None,
        reply_to=m.reply_to,
        fallback=m.fallback,
        unreadable=m.unreadable,
        reaction=None if m.reaction_json is None else _reaction(m.reaction_json),
        content_json=m.content_json,
        attachment=files[0] if m.attachments_kind is AttachmentsKind.ONE and files else None,
        attachments=files if m.attachments_kind is AttachmentsKind.LIST else (),
        own=m.own,
        deleted=m.removed is Removed.DELETED,
        expired=m.removed is Removed.EXPIRED,
    )


def inline_bytes(messages: Iterable[Message | StoredMessage]) -> int:
    """The attachment bytes handed out inline with these messages."""
    total = 0
    for m in messages:
        files = m.attachments if isinstance(m, StoredMessage) else (m.attachment, *m.attachments)
        if files:
            total += sum(len(a.data) for a in files if a is not None and a.data is not None)
    return total


def own_message(o: OwnMessage, own_inbox_id: str, budget: int) -> Message:
    """An own message of history: its outbox payload decoded as ingest decodes a
    peer's, placed at the time cone first took its key; its files' bytes inline while
    they fit `budget` (what the page's inline budget leaves)."""
    stored = record(
        content.decode(o.payload),
        message_id=o.id,
        conversation_id=o.conversation_id,
        sender_inbox_id=own_inbox_id,
        sent_at_ns=o.created_ns,
    )
    return message_of(inbox.as_stored(stored, o.kind, own=True, budget=budget))


__all__ = [
    "Attachment",
    "Consent",
    "ContactRecord",
    "Kind",
    "Member",
    "Message",
    "OutboxRecord",
    "Reaction",
    "Request",
    "Role",
    "StreamHealth",
    "inline_bytes",
    "message_of",
    "own_message",
]
