"""The content types cone names and the records content travels in, both ways."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from conepb.xmtpcontent import content_pb2

TEXT: Final = "xmtp.org/text:1.0"
MARKDOWN: Final = "xmtp.org/markdown:1.0"
DATA: Final = "cone.chat/data:1.0"
REACTION: Final = "xmtp.org/reaction:2.0"
ATTACHMENT: Final = "xmtp.org/attachment:1.0"
REPLY: Final = "xmtp.org/reply:1.0"
# Content types whose content is JSON defined by their codec: kept as `content_json`.
JSON_TYPES: Final = frozenset(
    {
        "xmtp.org/transactionReference",
        "xmtp.org/walletSendCalls",
        "coinbase.com/actions",
        "coinbase.com/intent",
    }
)
REMOTE_ATTACHMENT: Final = "xmtp.org/remoteStaticAttachment"
MULTI_REMOTE_ATTACHMENT: Final = "xmtp.org/multiRemoteStaticAttachment"
KEY_PARAMETER: Final = "cone.key"
# Content types that carry protocol state, never a peer's words: not delivered.
PROTOCOL_ONLY: Final = frozenset(
    {
        "xmtp.org/group_updated",
        "xmtp.org/readReceipt",
        "xmtp.org/leave_request",
        "xmtp.org/deleteMessage",
    }
)


class ReactionAction(StrEnum):
    """What a reaction does (a received one may be UNKNOWN)."""

    ADDED = "added"
    REMOVED = "removed"
    UNKNOWN = "unknown"


class ReactionSchema(StrEnum):
    """How a reaction's emoji is written (a received one may be UNKNOWN)."""

    UNICODE = "unicode"
    SHORTCODE = "shortcode"
    CUSTOM = "custom"
    UNKNOWN = "unknown"


# ReactionV2's numbers on the wire.
ACTIONS: Final = {1: ReactionAction.ADDED, 2: ReactionAction.REMOVED}
SCHEMAS: Final = {1: ReactionSchema.UNICODE, 2: ReactionSchema.SHORTCODE, 3: ReactionSchema.CUSTOM}


@dataclass(frozen=True)
class Reaction:
    """A reaction, sent or received."""

    message_id: str
    emoji: str
    action: ReactionAction = ReactionAction.ADDED
    schema: ReactionSchema = ReactionSchema.UNICODE
    reference_inbox_id: str = ""


@dataclass(frozen=True)
class Remote:
    """Where a remote attachment's encrypted bytes are and how to open them (XMTP's
    remote attachment codec: AES-256-GCM under an HKDF-SHA256 key)."""

    url: str
    content_digest: str
    secret: bytes
    salt: bytes
    nonce: bytes
    scheme: str
    content_length: int | None


@dataclass(frozen=True)
class AttachmentPart:
    """One file of a message: inline bytes, or a remote reference to download."""

    filename: str
    mime_type: str
    data: bytes | None = None
    remote: Remote | None = None


@dataclass(frozen=True)
class Outgoing:
    """The content of one outgoing message: exactly one field set."""

    text: str | None = None
    markdown: str | None = None
    data_json: str | None = None
    reaction: Reaction | None = None
    attachment: AttachmentPart | None = None

    @property
    def kind(self) -> str:
        """The content type a send key is bound to."""
        if self.text is not None:
            return TEXT
        if self.markdown is not None:
            return MARKDOWN
        if self.data_json is not None:
            return DATA
        if self.reaction is not None:
            return REACTION
        return ATTACHMENT


@dataclass(frozen=True)
class Decoded:
    """What cone keeps of one incoming message's content: each field goes to the
    message's record field of the same name (cone/core/intake/arrivals.py, which encodes
    the few the store keeps otherwise)."""

    content_type: str
    text: str | None = None
    data_json: str | None = None
    reply_to: str | None = None
    fallback: str | None = None
    send_key: str | None = None
    protocol_only: bool = False
    unreadable: str | None = None
    reaction: Reaction | None = None
    attachments: tuple[AttachmentPart, ...] = field(default=())
    # True for a multi remote attachment (`attachments` is a list on the wire).
    multi: bool = False
    content_json: str | None = None


class Unreadable(ValueError):
    """Content cone will not keep; the message is stored with this reason instead."""


def type_string(t: content_pb2.ContentTypeId) -> str:
    """`authority/type:major.minor`."""
    return f"{t.authority_id}/{t.type_id}:{t.version_major}.{t.version_minor}"
