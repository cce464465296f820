"""What a message from libxmtp becomes in cone's store: the one mapping from decoded
content to the message's record, and a new conversation's first consent."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Final

from cone.core import content
from cone.engine.port import ConversationInfo, RawMessage, XmtpConsent
from cone.store import AttachmentsKind, Consent, StoredAttachment, StoredMessage
from cone.store.records import MESSAGE_COLUMNS

# The decoded content's fields the record keeps as they are, each in the column of
# its name; `record` encodes the rest (`ENCODED`).
_CARRIED: Final = tuple(f.name for f in fields(content.Decoded) if f.name in MESSAGE_COLUMNS)
#: The decoded content's fields the record keeps in an encoding of the store's (or,
#: for `protocol_only`, not at all: such a message is never stored).
ENCODED: Final = frozenset({"reaction", "attachments", "multi", "protocol_only"})


def initial_consent(info: ConversationInfo, inbox_consent: XmtpConsent) -> Consent:
    """Consent for a conversation cone sees for the first time.

    XMTP's own record wins (it may come from another installation of this inbox).
    An unknown DM from an inbox this identity allowed is accepted; anything else is
    a request: groups are accepted explicitly.
    """
    if info.consent is XmtpConsent.ALLOWED:
        return Consent.ACCEPTED
    if info.consent is XmtpConsent.DENIED or inbox_consent is XmtpConsent.DENIED:
        return Consent.BLOCKED
    if not info.is_group and inbox_consent is XmtpConsent.ALLOWED:
        return Consent.ACCEPTED
    return Consent.REQUESTED


def decided(consent: XmtpConsent) -> Consent | None:
    """cone's decision that XMTP's consent record of a conversation stands for; None
    for unknown, which decides nothing (a request stays one, accepted stays so)."""
    if consent is XmtpConsent.UNKNOWN:
        return None
    return Consent.ACCEPTED if consent is XmtpConsent.ALLOWED else Consent.BLOCKED


def to_inbox(raw: RawMessage, own_inbox_id: str) -> StoredMessage | None:
    """The record of a message from libxmtp, or None when it is not delivered."""
    if not raw.application or raw.sender_inbox_id == own_inbox_id:
        return None
    decoded = content.decode(raw.content)
    if decoded.protocol_only:
        return None
    return record(
        decoded,
        message_id=raw.id,
        conversation_id=raw.conversation_id,
        sender_inbox_id=raw.sender_inbox_id,
        sent_at_ns=raw.sent_at_ns,
    )


def record(
    decoded: content.Decoded,
    *,
    message_id: str,
    conversation_id: str,
    sender_inbox_id: str,
    sent_at_ns: int,
) -> StoredMessage:
    """The one mapping from decoded content to what the store keeps of a message:
    for the inbox, and for an own message read back from the outbox (history)."""
    kind = None
    if decoded.attachments:
        kind = AttachmentsKind.LIST if decoded.multi else AttachmentsKind.ONE
    return StoredMessage(
        id=message_id,
        conversation_id=conversation_id,
        sender_inbox_id=sender_inbox_id,
        sent_at_ns=sent_at_ns,
        **{name: getattr(decoded, name) for name in _CARRIED},
        reaction_json=_reaction_json(decoded.reaction),
        attachments=tuple(_attachment(i, a) for i, a in enumerate(decoded.attachments)),
        attachments_kind=kind,
    )


def _reaction_json(r: content.Reaction | None) -> str | None:
    if r is None:
        return None
    return json.dumps(
        {
            "messageId": r.message_id,
            "emoji": r.emoji,
            "action": r.action,
            "schema": r.schema,
            "referenceInboxId": r.reference_inbox_id,
        }
    )


def _attachment(index: int, a: content.AttachmentPart) -> StoredAttachment:
    remote = None
    if a.remote is not None:
        r = a.remote
        remote = json.dumps(
            {
                "url": r.url,
                "contentDigest": r.content_digest,
                "secret": r.secret.hex(),
                "salt": r.salt.hex(),
                "nonce": r.nonce.hex(),
                "scheme": r.scheme,
                "contentLength": r.content_length,
            }
        )
    size = a.remote.content_length if a.remote is not None else None
    return StoredAttachment(index, a.filename, a.mime_type, size, data=a.data, remote_json=remote)


def bare(row: StoredMessage, reason: str) -> StoredMessage:
    """The row's metadata only, marked unreadable: what is kept when the row will not store."""
    return StoredMessage(
        id=row.id,
        conversation_id=row.conversation_id,
        sender_inbox_id=row.sender_inbox_id,
        sent_at_ns=row.sent_at_ns,
        content_type=row.content_type[:200],
        unreadable=reason[:300],
    )


__all__ = ["ENCODED", "bare", "initial_consent", "record", "to_inbox"]
