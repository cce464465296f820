"""The servicer's mapping: the core's values as proto messages, and a request's content
as the core's `Outgoing`.

Every enum's table between the core and the proto lives here, both ways. The message
mapping (`_message`) is the hot path of Receive, Peek and Messages: it is written field
by field on purpose (docs/bench.md, history).
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
from google.protobuf.timestamp_pb2 import Timestamp

from cone.core.content import (
    AttachmentPart,
    Outgoing,
    Reaction,
    ReactionAction,
    ReactionSchema,
)
from cone.core.history import ConversationView
from cone.core.model import Attachment, Consent, ContactRecord, Kind, Member, Message, Role
from cone.core.outbox import SendResult
from conepb.v1 import cone_pb2 as pb

KIND = {Kind.DM: pb.CONVERSATION_TYPE_DM, Kind.GROUP: pb.CONVERSATION_TYPE_GROUP}
NETWORK_STATES = {
    "reachable": pb.NETWORK_STATE_REACHABLE,
    "unreachable": pb.NETWORK_STATE_UNREACHABLE,
    "v3_cutover": pb.NETWORK_STATE_V3_CUTOVER,
    "identity_unknown": pb.NETWORK_STATE_IDENTITY_UNKNOWN,
}
KIND_OF = {number: kind for kind, number in KIND.items()}
_CONSENT = {
    Consent.REQUESTED: pb.CONSENT_STATE_REQUESTED,
    Consent.ACCEPTED: pb.CONSENT_STATE_ACCEPTED,
    Consent.BLOCKED: pb.CONSENT_STATE_BLOCKED,
}
CONSENT_OF = {number: consent for consent, number in _CONSENT.items()}


def timestamp(ns: int | None) -> Timestamp | None:
    """`ns` (nanoseconds since the epoch) as a proto Timestamp; None stays None."""
    if ns is None:
        return None
    ts = Timestamp()
    ts.FromNanoseconds(ns)
    return ts


def sent_fields(r: SendResult) -> dict[str, object]:
    """The fields SendResponse and ReplyResponse share."""
    return {
        "message_id": r.message_id,
        "conversation_id": r.conversation_id,
        "deduplicated": r.deduplicated,
        "published": r.published,
        "retry_after_ms": r.retry_after_ms,
    }


_ACTION_PB = {
    ReactionAction.ADDED: pb.REACTION_ACTION_ADDED,
    ReactionAction.REMOVED: pb.REACTION_ACTION_REMOVED,
}
_ACTION_OF = {v: k for k, v in _ACTION_PB.items()}
_SCHEMA_PB = {
    ReactionSchema.UNICODE: pb.REACTION_SCHEMA_UNICODE,
    ReactionSchema.SHORTCODE: pb.REACTION_SCHEMA_SHORTCODE,
    ReactionSchema.CUSTOM: pb.REACTION_SCHEMA_CUSTOM,
}
_SCHEMA_OF = {v: k for k, v in _SCHEMA_PB.items()}


def outgoing(request: pb.SendRequest | pb.ReplyRequest) -> Outgoing:
    """The content of a Send or Reply request (Reply's `text` when no other is set)."""
    which = request.WhichOneof("content")
    if which == "text" or (which is None and isinstance(request, pb.ReplyRequest)):
        return Outgoing(text=request.text)
    if which == "markdown":
        return Outgoing(markdown=request.markdown)
    if which == "data_json":
        return Outgoing(data_json=request.data_json)
    if which == "reaction":
        r = request.reaction
        return Outgoing(
            reaction=Reaction(
                message_id=r.message_id,
                emoji=r.emoji,
                action=_ACTION_OF.get(r.action, ReactionAction.ADDED),
                schema=_SCHEMA_OF.get(r.schema, ReactionSchema.UNICODE),
            )
        )
    if which == "attachment":
        a = request.attachment
        return Outgoing(attachment=AttachmentPart(a.filename, a.mime_type, bytes(a.data)))
    return Outgoing()


def _attachment_pb(a: Attachment) -> pb.Attachment:
    return pb.Attachment(
        filename=a.filename,
        mime_type=a.mime_type,
        size=a.size,
        sha256=a.sha256,
        data=a.data,
        error=a.error,
    )


def _reaction_pb(r: Reaction) -> pb.Reaction:
    return pb.Reaction(
        message_id=r.message_id,
        emoji=r.emoji,
        action=_ACTION_PB.get(r.action, pb.REACTION_ACTION_UNSPECIFIED),
        schema=_SCHEMA_PB.get(r.schema, pb.REACTION_SCHEMA_UNSPECIFIED),
        reference_inbox_id=r.reference_inbox_id or None,
    )


def _message(make: Callable[..., pb.Message], m: Message) -> pb.Message:
    # Field by field on an empty message: keyword arguments (and the time as a dict)
    # cost a third more, 1.46 against 1.08 µs a message (docs/bench.md, history).
    out = make()
    out.message_id = m.id
    out.conversation_id = m.conversation_id
    out.conversation_type = KIND[m.kind]
    out.sender_inbox_id = m.sender_inbox_id
    # Any int64 time is a valid Timestamp: no range check to make (`timestamp` has one).
    # Setting a field of `sent_at` marks it present, zero included, as the wire wants.
    sent_at = out.sent_at
    sent_at.seconds, sent_at.nanos = divmod(m.sent_at_ns, 1_000_000_000)
    out.content_type = m.content_type
    out.sequence = m.sequence
    out.deliveries = m.deliveries
    # The rest only when present (None leaves an optional field unset): a message
    # carries one or two of them, and handing over every None cost half the mapping.
    if m.text is not None:
        out.text = m.text
    if m.data_json is not None:
        out.data_json = m.data_json
    if m.reply_to is not None:
        out.reply_to = m.reply_to
    if m.fallback is not None:
        out.fallback = m.fallback
    if m.unreadable is not None:
        out.unreadable = m.unreadable
    if m.reaction is not None:
        out.reaction.CopyFrom(_reaction_pb(m.reaction))
    if m.content_json is not None:
        out.content_json = m.content_json
    if m.attachment is not None:
        out.attachment.CopyFrom(_attachment_pb(m.attachment))
    if m.attachments:
        out.attachments.extend(_attachment_pb(a) for a in m.attachments)
    if m.own:
        out.own = True
    if m.deleted:
        out.deleted = True
    if m.expired:
        out.expired = True
    return out


def message_to_pb(m: Message) -> pb.Message:
    """The one mapping from the core's message to the proto Message (Receive, Peek
    and Messages alike)."""
    return _message(pb.Message, m)


def add_messages(into: RepeatedCompositeFieldContainer[pb.Message], found: list[Message]) -> None:
    """`message_to_pb` of each message, built in place in a response's `messages`
    (handing the response a list of them copies each one)."""
    for m in found:
        _message(into.add, m)


_ROLE = {
    Role.MEMBER: pb.MEMBER_ROLE_MEMBER,
    Role.ADMIN: pb.MEMBER_ROLE_ADMIN,
    Role.SUPER_ADMIN: pb.MEMBER_ROLE_SUPER_ADMIN,
}


def members_to_pb(members: list[Member]) -> list[pb.Member]:
    """Group members as proto Members."""
    return [
        pb.Member(inbox_id=m.inbox_id, addresses=m.addresses, role=_ROLE[m.role]) for m in members
    ]


def contact_to_pb(c: ContactRecord) -> pb.Contact:
    """A saved contact as the proto Contact."""
    return pb.Contact(
        name=c.name, inbox_id=c.inbox_id, address=c.address, conversation_id=c.conversation_id
    )


def conversation_to_pb(v: ConversationView) -> pb.ConversationSummary:
    """A listed conversation as the proto ConversationSummary."""
    return pb.ConversationSummary(
        conversation_id=v.id,
        conversation_type=KIND[v.kind],
        consent=_CONSENT[v.consent],
        peer_inbox_id=v.peer_inbox_id,
        peer_address=v.peer_address,
        contact_name=v.contact_name,
        name=v.name,
        description=v.description,
        image_url=v.image_url,
        member_count=v.member_count,
        created_at=timestamp(v.created_ns),
        last_message_at=timestamp(v.last_message_ns),
        pending_messages=v.pending,
        active=v.active,
    )


__all__ = [
    "CONSENT_OF",
    "KIND",
    "KIND_OF",
    "NETWORK_STATES",
    "add_messages",
    "contact_to_pb",
    "conversation_to_pb",
    "members_to_pb",
    "message_to_pb",
    "outgoing",
    "sent_fields",
    "timestamp",
]
