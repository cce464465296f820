"""The servicer's one mapping from the core's Message to the proto Message: every
field set where the message has it, none where it does not, the time exact (zero and
before 1970 included), and the same bytes whether built alone or in a response."""

from __future__ import annotations

import pytest

from cone.core.content import Reaction, ReactionAction, ReactionSchema
from cone.core.model import Attachment, Kind, Message
from cone.daemon.convert import add_messages, message_to_pb
from conepb.v1 import cone_pb2 as pb

FILE = Attachment(0, "a.txt", "text/plain", 3, "ab" * 32, b"abc", None)
REMOTE = Attachment(1, "b.bin", "application/octet-stream", None, None, None, "not fetched")


def _message(**fields: object) -> Message:
    base: dict[str, object] = {
        "id": "11" * 32,
        "conversation_id": "22" * 16,
        "kind": Kind.GROUP,
        "sender_inbox_id": "33" * 32,
        "sent_at_ns": 1_700_000_000_123_456_789,
        "content_type": "xmtp.org/text:1.0",
        "sequence": 7,
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
        sequence=m.sequence,
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
        _message(
            reaction=Reaction(
                "55" * 32, "👍", ReactionAction.REMOVED, ReactionSchema.SHORTCODE, "66" * 32
            )
        ),
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
        _message(attachment=FILE),
        {
            "attachment": pb.Attachment(
                filename="a.txt", mime_type="text/plain", size=3, sha256="ab" * 32, data=b"abc"
            )
        },
        id="one-file",
    ),
    pytest.param(
        _message(attachments=(FILE, REMOTE)),
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
        _message(kind=Kind.DM, own=True, sequence=0, deliveries=0, text="mine"),
        {"own": True, "text": "mine"},
        id="own-dm",
    ),
    pytest.param(_message(deleted=True), {"deleted": True}, id="deleted"),
    pytest.param(_message(expired=True), {"expired": True}, id="expired"),
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
