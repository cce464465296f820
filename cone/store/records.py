"""Plain records the store hands out and takes in."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum, StrEnum
from types import MappingProxyType
from typing import Final


class Consent(IntEnum):
    """Consent as cone records it (numbers match the proto's ConsentState)."""

    REQUESTED = 1
    ACCEPTED = 2
    BLOCKED = 3


class Kind(IntEnum):
    """Conversation kinds (numbers match the proto's ConversationType)."""

    DM = 1
    GROUP = 2


class AttachmentsKind(IntEnum):
    """How a message carries its files (the `attachments_kind` column): one file
    (`attachment` on the wire) or a list (`attachments`, a multi remote attachment)."""

    ONE = 1
    LIST = 2


class Removed(StrEnum):
    """Why a message's content was taken out of the store (the `removed` column)."""

    DELETED = "deleted"  # its sender deleted it
    EXPIRED = "expired"  # its conversation's disappearing setting


@dataclass(frozen=True)
class Conversation:
    """A conversation cone knows about."""

    id: str
    kind: Kind
    peer_inbox_id: str
    consent: Consent
    first_seen_ns: int
    ingested_ns: int


@dataclass(frozen=True)
class StoredAttachment:
    """One file of a message as the store keeps it and hands it out.

    Taken in, a file carries its bytes (`data`) or a remote reference (`remote_json`,
    kept until it is downloaded and never handed out) and the size it declares; the
    store records its size and digest. Handed out, `data` is None when it does not
    come inline (too large for the batch, or a remote file not downloaded: see
    `error`)."""

    index: int
    filename: str
    mime_type: str
    size: int | None = None
    sha256: str | None = None
    data: bytes | None = None
    error: str | None = None
    remote_json: str | None = None


#: Field metadata of `StoredMessage`: content the store clears when the message is
#: removed (deleted by its sender or expired: cone/store/retention.py).
CONTENT: Final = MappingProxyType({"content": True})
#: Field metadata: kept by the store, never handed out (no field of the proto's Message).
STORE_ONLY: Final = MappingProxyType({"store_only": True})
#: Field metadata: not a column of `messages` but what a read adds to the row.
READ: Final = MappingProxyType({"read": True})


@dataclass(frozen=True)
class StoredMessage:
    """A message as cone keeps it: what ingest takes in and what Receive, Peek and
    Messages hand out, the one record of a message (docs/architecture.md).

    Every field not marked `READ` is the column of `messages` of the same name,
    written and read by that name (cone/store/inbox.py); the proto's Message is
    filled from it by name (cone/daemon/convert.py). A read adds the conversation's
    `kind`, the consumer's `deliveries` (0 where none is counted), `own` (Messages
    only) and the files."""

    id: str
    conversation_id: str
    sender_inbox_id: str
    sent_at_ns: int
    content_type: str
    text: str | None = field(default=None, metadata=CONTENT)
    data_json: str | None = field(default=None, metadata=CONTENT)
    reply_to: str | None = None
    fallback: str | None = field(default=None, metadata=CONTENT)
    send_key: str | None = field(default=None, metadata=STORE_ONLY)
    unreadable: str | None = None
    reaction_json: str | None = field(default=None, metadata=CONTENT)
    content_json: str | None = field(default=None, metadata=CONTENT)
    attachments_kind: AttachmentsKind | None = None
    # Set once the content was removed (cone/store/retention.py).
    removed: Removed | None = None
    # The inbox's order, given when the message is stored (0 before, and for an own one).
    seq: int = 0
    kind: Kind | None = field(default=None, metadata=READ)
    deliveries: int = field(default=0, metadata=READ)
    own: bool = field(default=False, metadata=READ)
    attachments: tuple[StoredAttachment, ...] = field(default=(), metadata=READ)


def _marked(key: str) -> frozenset[str]:
    return frozenset(f.name for f in fields(StoredMessage) if f.metadata.get(key))


#: The columns of `messages` a record holds, in the record's order.
MESSAGE_COLUMNS: Final = tuple(f.name for f in fields(StoredMessage) if not f.metadata.get("read"))
#: The columns a removal clears.
CONTENT_COLUMNS: Final = tuple(c for c in MESSAGE_COLUMNS if c in _marked("content"))
#: The fields never handed out.
STORE_ONLY_FIELDS: Final = _marked("store_only")


@dataclass(frozen=True)
class OwnMessage:
    """A message this identity sent, as the outbox keeps it: the encoded content,
    which the core decodes into a `StoredMessage` (cone.core.model)."""

    id: str
    conversation_id: str
    kind: Kind
    created_ns: int
    payload: bytes


@dataclass(frozen=True)
class Request:
    """A conversation held as a request: identities only."""

    conversation_id: str
    kind: Kind
    peer_inbox_id: str
    first_seen_ns: int
    pending_messages: int


@dataclass(frozen=True)
class ContactRecord:
    """A saved contact."""

    inbox_id: str
    name: str | None
    address: str | None
    conversation_id: str
