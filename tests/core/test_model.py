"""The one mapping from the store's record to the core's message, and own messages
decoded into it: pure logic, no daemon."""

from __future__ import annotations

import hashlib

from cone import limits
from cone.core import content
from cone.core.content import AttachmentPart, Outgoing, Reaction
from cone.core.model import inline_bytes, message_of, own_message
from cone.store import (
    AttachmentsKind,
    Kind,
    OwnMessage,
    Removed,
    StoredAttachment,
    StoredMessage,
)

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
    one = message_of(_stored(attachments=(_file(0),), attachments_kind=AttachmentsKind.ONE))
    assert one.attachment is not None and one.attachment.filename == "f0"
    assert one.attachments == ()
    files = (_file(0), _file(1))
    listed = message_of(_stored(attachments=files, attachments_kind=AttachmentsKind.LIST))
    assert listed.attachment is None and [a.index for a in listed.attachments] == [0, 1]
    deleted = message_of(_stored(removed=Removed.DELETED))
    expired = message_of(_stored(removed=Removed.EXPIRED))
    assert (deleted.deleted, deleted.expired, expired.deleted, expired.expired) == (
        True, False, False, True,
    )  # fmt: skip
    kept = message_of(_stored(deliveries=3, seq=9))
    assert (kept.deliveries, kept.sequence, kept.own) == (3, 9, False)


def _own(outgoing: Outgoing, reply_to: str | None = None) -> OwnMessage:
    _, payload = content.encode(content=outgoing, reply_to=reply_to, key="k")
    return OwnMessage("02", "c1", Kind.DM, 11, payload)


def test_an_own_message_is_decoded_as_a_peer_reads_it() -> None:
    reaction = Reaction(message_id="03", emoji="👍", reference_inbox_id=OWN)
    m = own_message(_own(Outgoing(reaction=reaction)), OWN, budget=0)
    assert (m.own, m.sequence, m.deliveries, m.sender_inbox_id) == (True, 0, 0, OWN)
    assert m.reaction == reaction and m.content_type == content.REACTION
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
        m = own_message(_own(Outgoing(attachment=part)), OWN, budget)
        assert m.attachment is not None
        assert (m.attachment.size, m.attachment.sha256) == (
            len(data), hashlib.sha256(data).hexdigest(),
        )  # fmt: skip
        assert (m.attachment.data is not None) is inline, (len(data), budget)
        assert inline_bytes([m]) == (len(data) if inline else 0)
