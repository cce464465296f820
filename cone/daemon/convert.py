"""The servicer's mapping: the core's values as proto messages, and a request's content
as the core's `Outgoing`.

Every enum's table between the core and the proto lives here, both ways. A message
(the store's record, `Message`) becomes the proto Message by the proto's descriptor
(`message_to_pb`): each proto field is filled from the record's field of the same
name, a Timestamp `x` from `x_ns`; only the fields in `RENAMED` and `DERIVED` say
otherwise. A new message field is the proto's field, the record's field and a store
migration (docs/architecture.md); `tests/daemon/test_message_pb.py` holds that every
field of either side is accounted for.
"""

from __future__ import annotations

import json
from typing import Final

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
from cone.core.model import (
    Attachment,
    AttachmentsKind,
    Consent,
    ContactRecord,
    Kind,
    Member,
    Message,
    Removed,
    Role,
)
from cone.core.outbox import SendResult
from cone.daemon.fill import Derived, compile_fill
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


def _reaction_pb(reaction_json: str) -> pb.Reaction:
    """A stored reaction (cone/core/intake/arrivals.py) as the proto Reaction."""
    r = json.loads(reaction_json)
    return pb.Reaction(
        message_id=r["messageId"],
        emoji=r["emoji"],
        action=_ACTION_PB.get(ReactionAction(r["action"]), pb.REACTION_ACTION_UNSPECIFIED),
        schema=_SCHEMA_PB.get(ReactionSchema(r["schema"]), pb.REACTION_SCHEMA_UNSPECIFIED),
        reference_inbox_id=r.get("referenceInboxId") or None,
    )


def _one_file(m: Message) -> Attachment | None:
    if m.attachments_kind is AttachmentsKind.ONE and m.attachments:
        return m.attachments[0]
    return None


def _file_list(m: Message) -> tuple[Attachment, ...]:
    return m.attachments if m.attachments_kind is AttachmentsKind.LIST else ()


#: Proto Message fields filled from a record field of another name (the store's).
RENAMED: Final = {"message_id": "id", "conversation_type": "kind", "sequence": "seq"}
#: Proto Message fields made from the stored encodings: each with the record fields
#: it reads and how (one file or a list of them, a reaction kept as JSON, the flags
#: of a removal).
DERIVED: Final[dict[str, Derived]] = {
    "reaction": (("reaction_json",), lambda m: _reaction_pb(m.reaction_json)),
    "attachment": (("attachments", "attachments_kind"), _one_file),
    "attachments": (("attachments", "attachments_kind"), _file_list),
    "deleted": (("removed",), lambda m: m.removed is Removed.DELETED),
    "expired": (("removed",), lambda m: m.removed is Removed.EXPIRED),
}
#: How a file of a message becomes the proto Attachment (every field by its name).
ATTACHMENT_FILL: Final = compile_fill(pb.Attachment.DESCRIPTOR, Attachment)
#: How a message becomes the proto Message.
MESSAGE_FILL: Final = compile_fill(
    pb.Message.DESCRIPTOR,
    Message,
    renamed=RENAMED,
    derived=DERIVED,
    nested={pb.Attachment.DESCRIPTOR.full_name: ATTACHMENT_FILL},
)
_fill_message = MESSAGE_FILL.fill


def message_to_pb(m: Message) -> pb.Message:
    """The one mapping from a message to the proto Message (Receive, Peek and Messages
    alike), by the proto's descriptor (the module's docstring)."""
    out = pb.Message()
    _fill_message(out, m)
    return out


def add_messages(into: RepeatedCompositeFieldContainer[pb.Message], found: list[Message]) -> None:
    """`message_to_pb` of each message, built in place in a response's `messages`
    (handing the response a list of them copies each one)."""
    add = into.add
    for m in found:
        _fill_message(add(), m)


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
    "ATTACHMENT_FILL",
    "CONSENT_OF",
    "DERIVED",
    "KIND",
    "KIND_OF",
    "MESSAGE_FILL",
    "NETWORK_STATES",
    "RENAMED",
    "add_messages",
    "contact_to_pb",
    "conversation_to_pb",
    "members_to_pb",
    "message_to_pb",
    "outgoing",
    "sent_fields",
    "timestamp",
]
