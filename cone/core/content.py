"""Message content on the wire: what cone sends and how it reads what arrives.

cone speaks XMTP's content envelope (`EncodedContent`, XIP-5):

| cone field | XMTP content type           | content bytes                                  |
| ---------- | --------------------------- | ---------------------------------------------- |
| `text`     | `xmtp.org/text:1.0`         | UTF-8 text                                     |
| `data`     | `cone.chat/data:1.0`        | UTF-8 JSON; fallback is a short readable text  |
| `replyTo`  | `xmtp.org/reply:1.0`        | the inner EncodedContent; parameters carry the |
|            |                             | referenced message id and inner content type   |

The send key travels as the envelope parameter `cone.key`, so that a receiving cone
drops a repeat of one (sender, key) and a restarted sender can find a prepared
message by its key. Other clients ignore unknown parameters.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Final

from conepb.xmtpcontent import content_pb2

TEXT: Final = "xmtp.org/text:1.0"
DATA: Final = "cone.chat/data:1.0"
REPLY: Final = "xmtp.org/reply:1.0"
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
_FALLBACK_DATA_CHARS: Final = 200


@dataclass(frozen=True)
class Decoded:
    """What cone keeps of one incoming message's content."""

    content_type: str
    text: str | None = None
    data_json: str | None = None
    reply_to: str | None = None
    fallback: str | None = None
    send_key: str | None = None
    protocol_only: bool = False


def _type_id(authority: str, type_id: str, major: int, minor: int) -> content_pb2.ContentTypeId:
    return content_pb2.ContentTypeId(
        authority_id=authority, type_id=type_id, version_major=major, version_minor=minor
    )


def type_string(t: content_pb2.ContentTypeId) -> str:
    """`authority/type:major.minor`."""
    return f"{t.authority_id}/{t.type_id}:{t.version_major}.{t.version_minor}"


def _inner_text(text: str) -> content_pb2.EncodedContent:
    return content_pb2.EncodedContent(
        type=_type_id("xmtp.org", "text", 1, 0),
        parameters={"encoding": "UTF-8"},
        content=text.encode(),
    )


def _inner_data(data_json: str) -> content_pb2.EncodedContent:
    shown = data_json if len(data_json) <= _FALLBACK_DATA_CHARS else data_json[:200] + "…"
    return content_pb2.EncodedContent(
        type=_type_id("cone.chat", "data", 1, 0),
        parameters={"encoding": "UTF-8"},
        fallback=f"JSON data: {shown}",
        content=data_json.encode(),
    )


def encode(
    *,
    text: str | None = None,
    data_json: str | None = None,
    reply_to: str | None = None,
    reply_to_inbox_id: str | None = None,
    key: str | None = None,
) -> tuple[str, bytes]:
    """The content type and envelope bytes for an outgoing message."""
    if (text is None) == (data_json is None):
        raise ValueError("exactly one of text and data_json")
    inner = _inner_text(text) if text is not None else _inner_data(data_json or "")
    outer = inner
    if reply_to is not None:
        params = {"reference": reply_to, "contentType": type_string(inner.type)}
        if reply_to_inbox_id:
            params["referenceInboxId"] = reply_to_inbox_id
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


def _content_bytes(env: content_pb2.EncodedContent) -> bytes:
    if not env.HasField("compression"):
        return bytes(env.content)
    wbits = -15 if env.compression == content_pb2.COMPRESSION_DEFLATE else 31
    return zlib.decompress(env.content, wbits)


def _fill(env: content_pb2.EncodedContent) -> tuple[str | None, str | None]:
    """(text, data_json) for the types cone reads; (None, None) otherwise."""
    kind = (env.type.authority_id, env.type.type_id)
    if kind == ("xmtp.org", "text") or kind == ("xmtp.org", "markdown"):
        return _content_bytes(env).decode("utf-8", errors="replace"), None
    if kind == ("cone.chat", "data"):
        raw = _content_bytes(env).decode("utf-8", errors="replace")
        try:
            json.loads(raw)
        except ValueError:
            return None, None
        return None, raw
    return None, None


def decode(raw: bytes) -> Decoded:
    """Read an incoming envelope; never raises (unreadable content keeps its fallback)."""
    try:
        env = content_pb2.EncodedContent.FromString(raw)
    except Exception:  # a peer's malformed bytes must not stop ingest
        return Decoded(content_type="unknown", fallback="unreadable content")
    ctype = type_string(env.type)
    key = env.parameters.get(KEY_PARAMETER) or None
    base = f"{env.type.authority_id}/{env.type.type_id}"
    if base in PROTOCOL_ONLY:
        return Decoded(content_type=ctype, protocol_only=True, send_key=key)
    fallback = env.fallback if env.HasField("fallback") else None
    reply_to = None
    body = env
    if base == "xmtp.org/reply":
        reply_to = env.parameters.get("reference") or None
        try:
            body = content_pb2.EncodedContent.FromString(_content_bytes(env))
        except Exception:  # same reason as above
            return Decoded(ctype, reply_to=reply_to, fallback=fallback, send_key=key)
    try:
        text, data_json = _fill(body)
    except (zlib.error, ValueError):
        text, data_json = None, None
    return Decoded(
        content_type=ctype,
        text=text,
        data_json=data_json,
        reply_to=reply_to,
        fallback=None if (text is not None or data_json is not None) else fallback,
        send_key=key,
    )
