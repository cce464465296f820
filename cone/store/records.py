"""Plain records the store hands out and takes in."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum


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
class AttachmentRow:
    """One file of a message as the store keeps it: inline bytes, or a remote
    reference (`remote_json`) until it is downloaded."""

    filename: str
    mime_type: str
    data: bytes | None = None
    remote_json: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class StoredAttachment:
    """One file of a received message; `data` is None when it is not handed out
    inline (too large for the batch, or a remote file not downloaded: see `error`)."""

    index: int
    filename: str
    mime_type: str
    size: int | None
    sha256: str | None
    data: bytes | None
    error: str | None


@dataclass(frozen=True)
class IncomingMessage:
    """A decoded message ready to enter the inbox."""

    id: str
    conversation_id: str
    sender_inbox_id: str
    sent_at_ns: int
    content_type: str
    text: str | None = None
    data_json: str | None = None
    reply_to: str | None = None
    fallback: str | None = None
    send_key: str | None = None
    unreadable: str | None = None
    reaction_json: str | None = None
    content_json: str | None = None
    attachments: tuple[AttachmentRow, ...] = ()
    attachments_kind: AttachmentsKind | None = None


@dataclass(frozen=True)
class StoredMessage:
    """A message as the store hands it out, to Receive, Peek and Messages alike
    (`deliveries` is 0 where no consumer is counted; `own` only in Messages)."""

    seq: int
    id: str
    conversation_id: str
    kind: Kind
    sender_inbox_id: str
    sent_at_ns: int
    content_type: str
    text: str | None
    data_json: str | None
    reply_to: str | None
    fallback: str | None
    deliveries: int
    unreadable: str | None = None
    reaction_json: str | None = None
    content_json: str | None = None
    attachments: tuple[StoredAttachment, ...] = ()
    attachments_kind: AttachmentsKind | None = None
    # Set once the content was removed (cone/store/retention.py).
    removed: Removed | None = None
    own: bool = False


@dataclass(frozen=True)
class OwnMessage:
    """A message this identity sent, as the outbox keeps it: the encoded content,
    which the core decodes into a `StoredMessage` (cone.core.messages)."""

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
