"""What the core hands out: the types the daemon's servicer converts, and nothing else.

One message type serves Receive, Peek and Messages: the store's record of a message
(`Message`, cone/store/records.py), which the servicer maps to the proto by the
proto's descriptor (cone/daemon/convert.py). An own message in history is read back
from the outbox and decoded by the same mapping ingest uses (`arrivals.record`), then
made the record the inbox would hand out for it (`inbox.as_stored`): whatever
`receive` shows of a message, `messages` shows the same.

The enums and records below that come from the store and the engine (consent, kinds,
contacts, members, stream health, a file's `Attachment`, the stored encodings
`AttachmentsKind` and `Removed`) are plain values; the core re-exports them so that
the servicer imports the core alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from cone.core import content
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

#: One message, as Receive, Peek and Messages hand it out: `deliveries` is the only
#: field that depends on who asks (0 from Peek and Messages, which count nothing).
Message = StoredMessage
#: One file of a message, as the store reads it (`data` None when it is not handed
#: out inline: too large for the batch, or a remote file not downloaded yet, see
#: `error`).
Attachment = StoredAttachment


def inline_bytes(messages: Iterable[Message]) -> int:
    """The attachment bytes handed out inline with these messages."""
    return sum(len(a.data) for m in messages for a in m.attachments if a.data is not None)


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
    return inbox.as_stored(stored, o.kind, own=True, budget=budget)


__all__ = [
    "Attachment",
    "AttachmentsKind",
    "Consent",
    "ContactRecord",
    "Kind",
    "Member",
    "Message",
    "OutboxRecord",
    "Removed",
    "Request",
    "Role",
    "StreamHealth",
    "inline_bytes",
    "own_message",
]
