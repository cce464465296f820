"""The stored encodings as the wire shows them (the record mapped by the proto's
descriptor), and own messages decoded into the same record: pure logic, no daemon."""

from __future__ import annotations

import dataclasses
import hashlib

from cone import limits
from cone.core import content
from cone.core.content import AttachmentPart, Outgoing, Reaction
from cone.core.intake import arrivals
from cone.core.model import inline_bytes, own_message
from cone.daemon.convert import message_to_pb
from cone.store import (
    AttachmentsKind,
    Kind,
    OwnMessage,
    Removed,
    StoredAttachment,
    StoredMessage,
)
from cone.store.records import MESSAGE_COLUMNS
from conepb.v1 import cone_pb2 as pb

OWN = "ab" * 32


def _stored(**kw: object) -> StoredMessage:
    fields: dict[str, object] = {
        "seq": 7, "id": "01", "conversation_id": "c1", "kind": Kind.GROUP,
        "sender_inbox_id": "cd" * 32, "sent_at_ns": 5, "content_type": "t", "text": None,
        "data_json": None, "reply_to": None, "fallback": None, "deliveries": 2,
    }  # fmt: skip
    return StoredMessage(**{**fields, **kw})  # type: ignore[arg-type]


def _file(index: int, data: bytes | None = b"x") -> StoredAttachment:
    return StoredAttachment(index, f"f{index}", "a/b", 1, "00", data, None)


def test_the_stored_encodings_become_the_wires_shape() -> None:
    one = message_to_pb(_stored(attachments=(_file(0),), attachments_kind=AttachmentsKind.ONE))
    assert one.HasField("attachment") and one.attachment.filename == "f0"
    assert len(one.attachments) == 0
    files = (_file(0), _file(1))
    listed = message_to_pb(_stored(attachments=files, attachments_kind=AttachmentsKind.LIST))
    assert not listed.HasField("attachment")
    assert [a.filename for a in listed.attachments] == ["f0", "f1"]
    deleted = message_to_pb(_stored(removed=Removed.DELETED))
    expired = message_to_pb(_stored(removed=Removed.EXPIRED))
    assert (deleted.deleted, deleted.expired, expired.deleted, expired.expired) == (
        True, False, False, True,
    )  # fmt: skip
    assert not deleted.HasField("expired") and not expired.HasField("deleted")
    kept = message_to_pb(_stored(deliveries=3, seq=9))
    assert (kept.deliveries, kept.sequence, kept.HasField("own")) == (3, 9, False)


def _own(outgoing: Outgoing, reply_to: str | None = None) -> OwnMessage:
    _, payload = content.encode(content=outgoing, reply_to=reply_to, key="k")
    return OwnMessage("02", "c1", Kind.DM, 11, payload)


def test_an_own_message_is_decoded_as_a_peer_reads_it() -> None:
    reaction = Reaction(message_id="03", emoji="👍", reference_inbox_id=OWN)
    m = message_to_pb(own_message(_own(Outgoing(reaction=reaction)), OWN, budget=0))
    assert (m.own, m.sequence, m.deliveries, m.sender_inbox_id) == (True, 0, 0, OWN)
    assert m.reaction == pb.Reaction(
        message_id="03",
        emoji="👍",
        action=pb.REACTION_ACTION_ADDED,
        schema=pb.REACTION_SCHEMA_UNICODE,
        reference_inbox_id=OWN,
    )
    assert m.content_type == content.REACTION
    assert m.fallback == 'Reacted with "👍" to an earlier message'
    data = own_message(_own(Outgoing(data_json='{"b": 1, "a": [1.5]}'), "03"), OWN, 0)
    assert (data.data_json, data.reply_to, data.content_type) == (
        '{"b":1,"a":[1.5]}', "03", content.REPLY,
    )  # fmt: skip


def test_own_files_come_inline_within_the_per_file_cap_and_the_pages_budget() -> None:
    small = bytes(1000)
    big = bytes(limits.ATTACHMENT_INLINE_MAX_BYTES + 1)
    for data, budget, inline in ((small, 1000, True), (small, 999, False), (big, 10**9, False)):
        part = AttachmentPart("f.bin", "application/octet-stream", data)
        record = own_message(_own(Outgoing(attachment=part)), OWN, budget)
        m = message_to_pb(record)
        assert m.HasField("attachment")
        assert (m.attachment.size, m.attachment.sha256) == (
            len(data), hashlib.sha256(data).hexdigest(),
        )  # fmt: skip
        assert m.attachment.HasField("data") is inline, (len(data), budget)
        assert inline_bytes([record]) == (len(data) if inline else 0)


def test_decoded_content_reaches_the_record_by_name() -> None:
    # A field the decoder adds goes to the record's column of its name, or is one of
    # the few the record keeps in the store's encoding.
    decoded = {f.name for f in dataclasses.fields(content.Decoded)}
    assert decoded - set(MESSAGE_COLUMNS) == arrivals.ENCODED
    m = arrivals.record(
        content.Decoded("t", text="x", fallback="f", send_key="k", unreadable="u"),
        message_id="01",
        conversation_id="c1",
        sender_inbox_id="s",
        sent_at_ns=1,
    )
    assert (m.text, m.fallback, m.send_key, m.unreadable) == ("x", "f", "k", "u")
