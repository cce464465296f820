"""The servicer's one mapping from a message's record to the proto Message: every
field set where the record has it, none where it does not, the time exact (zero and
before 1970 included), and the same bytes whether built alone or in a response. And
the one place of a message's fields: every proto field is filled from the record,
every record field reaches the wire or is declared kept by the store alone."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cone.core.model import Attachment, AttachmentsKind, Kind, Message, Removed
from cone.daemon import convert
from cone.daemon.convert import add_messages, message_to_pb
from cone.daemon.fill import compile_fill
from cone.store.records import STORE_ONLY_FIELDS
from conepb.v1 import cone_pb2 as pb

FILE = Attachment(0, "a.txt", "text/plain", 3, "ab" * 32, b"abc", None)
REMOTE = Attachment(1, "b.bin", "application/octet-stream", None, None, None, "not fetched")
REACTION = {
    "messageId": "55" * 32,
    "emoji": "👍",
    "action": "removed",
    "schema": "shortcode",
    "referenceInboxId": "66" * 32,
}


def _message(**fields: object) -> Message:
    base: dict[str, object] = {
        "id": "11" * 32,
        "conversation_id": "22" * 16,
        "kind": Kind.GROUP,
        "sender_inbox_id": "33" * 32,
        "sent_at_ns": 1_700_000_000_123_456_789,
        "content_type": "xmtp.org/text:1.0",
        "seq": 7,
        "deliveries": 2,
    }
    return Message(**{**base, **fields})  # type: ignore[arg-type]


def _expected(m: Message, **fields: object) -> pb.Message:
    """What the wire must carry for `m`, written out field by field."""
    seconds, nanos = divmod(m.sent_at_ns, 1_000_000_000)
    out = pb.Message(
        message_id=m.id,
        conversation_id=m.conversation_id,
        conversation_type=pb.CONVERSATION_TYPE_GROUP
        if m.kind is Kind.GROUP
        else pb.CONVERSATION_TYPE_DM,
        sender_inbox_id=m.sender_inbox_id,
        content_type=m.content_type,
        sequence=m.seq,
        deliveries=m.deliveries,
        **fields,  # type: ignore[arg-type]
    )
    out.sent_at.seconds, out.sent_at.nanos = seconds, nanos
    return out


CASES = [
    pytest.param(_message(text="hi"), {"text": "hi"}, id="text"),
    pytest.param(
        _message(data_json='{"a":1}', reply_to="44" * 32, fallback="fb"),
        {"data_json": '{"a":1}', "reply_to": "44" * 32, "fallback": "fb"},
        id="data-reply-fallback",
    ),
    pytest.param(
        _message(unreadable="unknown codec", content_json="{}"),
        {"unreadable": "unknown codec", "content_json": "{}"},
        id="unreadable-content-json",
    ),
    pytest.param(
        _message(reaction_json=json.dumps(REACTION)),
        {
            "reaction": pb.Reaction(
                message_id="55" * 32,
                emoji="👍",
                action=pb.REACTION_ACTION_REMOVED,
                schema=pb.REACTION_SCHEMA_SHORTCODE,
                reference_inbox_id="66" * 32,
            )
        },
        id="reaction",
    ),
    pytest.param(
        _message(attachments=(FILE,), attachments_kind=AttachmentsKind.ONE),
        {
            "attachment": pb.Attachment(
                filename="a.txt", mime_type="text/plain", size=3, sha256="ab" * 32, data=b"abc"
            )
        },
        id="one-file",
    ),
    pytest.param(
        _message(attachments=(FILE, REMOTE), attachments_kind=AttachmentsKind.LIST),
        {
            "attachments": [
                pb.Attachment(
                    filename="a.txt", mime_type="text/plain", size=3, sha256="ab" * 32, data=b"abc"
                ),
                pb.Attachment(
                    filename="b.bin", mime_type="application/octet-stream", error="not fetched"
                ),
            ]
        },
        id="file-list",
    ),
    pytest.param(
        _message(kind=Kind.DM, own=True, seq=0, deliveries=0, text="mine", send_key="k"),
        {"own": True, "text": "mine"},
        id="own-dm",
    ),
    pytest.param(_message(removed=Removed.DELETED), {"deleted": True}, id="deleted"),
    pytest.param(_message(removed=Removed.EXPIRED), {"expired": True}, id="expired"),
    pytest.param(_message(text="t", data_json="{}"), {"text": "t"}, id="one-content-as-the-oneof"),
    pytest.param(
        _message(
            reaction_json=json.dumps({**REACTION, "action": "unknown", "referenceInboxId": ""})
        ),
        {
            "reaction": pb.Reaction(
                message_id="55" * 32, emoji="👍", schema=pb.REACTION_SCHEMA_SHORTCODE
            )
        },
        id="reaction-unknown-action-no-reference",
    ),
    pytest.param(_message(sent_at_ns=0, text=""), {"text": ""}, id="epoch-empty-text"),
    pytest.param(_message(sent_at_ns=-1, text="x"), {"text": "x"}, id="before-1970"),
]


@pytest.mark.parametrize(("message", "fields"), CASES)
def test_message_to_pb_sets_what_the_message_has_and_nothing_else(
    message: Message, fields: dict[str, object]
) -> None:
    built = message_to_pb(message)
    assert built == _expected(message, **fields)
    assert built.HasField("sent_at")  # present even at the epoch
    # Optional fields the message does not have stay absent, not empty.
    for name in ("text", "data_json", "reply_to", "fallback", "unreadable", "content_json"):
        assert built.HasField(name) == (name in fields), name
    assert built.SerializeToString(deterministic=True) == _expected(
        message, **fields
    ).SerializeToString(deterministic=True)


def test_a_response_built_in_place_carries_the_same_bytes() -> None:
    found = [case.values[0] for case in CASES]
    response = pb.MessagesResponse(more=True)
    add_messages(response.messages, found)  # type: ignore[arg-type]
    alone = pb.MessagesResponse(more=True, messages=[message_to_pb(m) for m in found])  # type: ignore[arg-type]
    assert response.SerializeToString(deterministic=True) == alone.SerializeToString(
        deterministic=True
    )
    assert [m.sent_at.ToNanoseconds() for m in response.messages] == [
        m.sent_at_ns  # type: ignore[attr-defined]
        for m in found
    ]


def _full(**fields: object) -> Message:
    """A record with every field set to something the wire shows."""
    return _message(
        text="t", reply_to="44" * 32, fallback="f", send_key="k", unreadable="u",
        reaction_json=json.dumps(REACTION), content_json="[]", own=True, **fields,
    )  # fmt: skip


def test_every_field_of_the_proto_message_is_filled_from_the_record() -> None:
    # The proto's alternatives (a oneof, one file or a list, deleted or expired) take
    # two records; between them, every field of the proto Message is set.
    every_file_field = dataclasses.replace(FILE, error="e")
    one = _full(
        attachments=(every_file_field,),
        attachments_kind=AttachmentsKind.ONE,
        removed=Removed.DELETED,
    )
    other = _message(
        data_json="{}", attachments=(FILE,), attachments_kind=AttachmentsKind.LIST,
        removed=Removed.EXPIRED,
    )  # fmt: skip
    filled = {fd.name for m in (one, other) for fd, _ in message_to_pb(m).ListFields()}
    assert filled == set(pb.Message.DESCRIPTOR.fields_by_name)
    files = {fd.name for fd, _ in message_to_pb(one).attachment.ListFields()}
    assert files == set(pb.Attachment.DESCRIPTOR.fields_by_name)


def test_every_field_of_the_record_reaches_the_wire_or_is_kept_by_the_store_alone() -> None:
    record = {f.name for f in dataclasses.fields(Message)}
    assert record - convert.MESSAGE_FILL.reads == STORE_ONLY_FIELDS == {"send_key"}
    # A file's index is its place in the list; its remote reference stays in the store.
    files = {f.name for f in dataclasses.fields(Attachment)}
    assert files - convert.ATTACHMENT_FILL.reads == {"index", "remote_json"}


def test_a_proto_field_without_a_record_field_is_refused_when_the_mapping_is_made() -> None:
    # The record as it would be had `fallback` been added to the proto alone.
    fields = [(f.name, f.type, f) for f in dataclasses.fields(Message) if f.name != "fallback"]
    partial = dataclasses.make_dataclass("Partial", fields, frozen=True)
    with pytest.raises(TypeError, match=r"cone\.v1\.Message\.fallback has no field 'fallback'"):
        compile_fill(
            pb.Message.DESCRIPTOR, partial, renamed=convert.RENAMED, derived=convert.DERIVED
        )
