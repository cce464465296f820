"""Outgoing content as XMTP's envelope: the bytes cone sends for each kind of content."""

from __future__ import annotations

from typing import Final

from cone.core.content._types import (
    ACTIONS,
    KEY_PARAMETER,
    SCHEMAS,
    AttachmentPart,
    Outgoing,
    Reaction,
    ReactionAction,
    type_string,
)
from conepb.xmtpcontent import content_pb2

_FALLBACK_DATA_CHARS: Final = 200


def _type_id(authority: str, type_id: str, major: int, minor: int) -> content_pb2.ContentTypeId:
    return content_pb2.ContentTypeId(
        authority_id=authority, type_id=type_id, version_major=major, version_minor=minor
    )


def _inner_text(text: str) -> content_pb2.EncodedContent:
    return content_pb2.EncodedContent(
        type=_type_id("xmtp.org", "text", 1, 0),
        parameters={"encoding": "UTF-8"},
        content=text.encode(),
    )


def _inner_data(data_json: str) -> content_pb2.EncodedContent:
    shown = (
        data_json
        if len(data_json) <= _FALLBACK_DATA_CHARS
        else data_json[:_FALLBACK_DATA_CHARS] + "…"
    )
    return content_pb2.EncodedContent(
        type=_type_id("cone.chat", "data", 1, 0),
        parameters={"encoding": "UTF-8"},
        fallback=f"JSON data: {shown}",
        content=data_json.encode(),
    )


def _inner_markdown(markdown: str) -> content_pb2.EncodedContent:
    return content_pb2.EncodedContent(
        type=_type_id("xmtp.org", "markdown", 1, 0),
        parameters={"encoding": "UTF-8"},
        content=markdown.encode(),
    )


def _inner_reaction(r: Reaction) -> content_pb2.EncodedContent:
    action = {v: k for k, v in ACTIONS.items()}[r.action]
    schema = {v: k for k, v in SCHEMAS.items()}[r.schema]
    body = content_pb2.ReactionV2(
        reference=r.message_id,
        reference_inbox_id=r.reference_inbox_id,
        action=action,
        content=r.emoji,
        schema=schema,
    )
    verb = "Reacted with" if r.action == ReactionAction.ADDED else "Removed"
    return content_pb2.EncodedContent(
        type=_type_id("xmtp.org", "reaction", 2, 0),
        fallback=f'{verb} "{r.emoji}" to an earlier message',
        content=body.SerializeToString(),
    )


def _inner_attachment(a: AttachmentPart) -> content_pb2.EncodedContent:
    params = {"mimeType": a.mime_type}
    if a.filename:
        params["filename"] = a.filename
    shown = a.filename or "this attachment"
    return content_pb2.EncodedContent(
        type=_type_id("xmtp.org", "attachment", 1, 0),
        parameters=params,
        fallback=f"Can't display {shown}. This app doesn't support attachments.",
        content=a.data or b"",
    )


def _inner(c: Outgoing) -> content_pb2.EncodedContent:
    if c.text is not None:
        return _inner_text(c.text)
    if c.markdown is not None:
        return _inner_markdown(c.markdown)
    if c.data_json is not None:
        return _inner_data(c.data_json)
    if c.reaction is not None:
        return _inner_reaction(c.reaction)
    if c.attachment is not None:
        return _inner_attachment(c.attachment)
    raise ValueError("no content")


def encode(
    *,
    text: str | None = None,
    data_json: str | None = None,
    content: Outgoing | None = None,
    reply_to: str | None = None,
    reply_to_inbox_id: str | None = None,
    key: str | None = None,
) -> tuple[str, bytes]:
    """The content type and envelope bytes for an outgoing message (give `content`,
    or `text` or `data_json`)."""
    if content is None:
        if (text is None) == (data_json is None):
            raise ValueError("exactly one of text and data_json")
        content = Outgoing(text=text, data_json=data_json)
    inner = _inner(content)
    outer = inner
    if reply_to is not None:
        params = {"reference": reply_to, "contentType": type_string(inner.type)}
        if reply_to_inbox_id:
            params["referenceInboxId"] = reply_to_inbox_id
        text = content.text if content.text is not None else content.markdown
        summary = text if text is not None else "data"
        outer = content_pb2.EncodedContent(
            type=_type_id("xmtp.org", "reply", 1, 0),
            parameters=params,
            fallback=f'Replied with "{summary}" to an earlier message',
            content=inner.SerializeToString(),
        )
    if key is not None:
        outer.parameters[KEY_PARAMETER] = key
    return type_string(outer.type), outer.SerializeToString()


def reply_inner_type(payload: bytes) -> str:
    """The content type a reply envelope (as cone encodes it) wraps."""
    outer = content_pb2.EncodedContent.FromString(payload)
    return type_string(content_pb2.EncodedContent.FromString(outer.content).type)
