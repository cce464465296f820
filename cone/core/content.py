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

Reading is defensive: the bytes come from anyone on the network. `decode` never
raises, never inflates more than `MAX_CONTENT_BYTES`, and hands back only content
every interface can carry (finite JSON numbers, bounded nesting, valid Unicode).
What it cannot read it marks `unreadable` with the reason, keeping the rest.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass, replace
from typing import Any, Final

from cone import limits
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
# The most content one stored message keeps (text or JSON, after decompression):
# above XMTP's own message limit for plain content, far below what a transport carries.
MAX_CONTENT_BYTES: Final = limits.CONTENT_MAX_BYTES
# The deepest JSON nesting kept: deeper data is unreadable (every JSON library
# downstream recurses, and no agent needs more).
MAX_JSON_DEPTH: Final = 64
# The most of a sender's fallback text kept.
MAX_FALLBACK_CHARS: Final = 4096
# The longest content type, send key or referenced id kept (cone's keys are ≤ 256).
MAX_LABEL_CHARS: Final = 256


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
    unreadable: str | None = None


class Unreadable(ValueError):
    """Content cone will not keep; the message is stored with this reason instead."""


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
        if len(env.content) > MAX_CONTENT_BYTES:
            raise Unreadable(f"content larger than {MAX_CONTENT_BYTES} bytes")
        return bytes(env.content)
    wbits = -15 if env.compression == content_pb2.COMPRESSION_DEFLATE else 31
    inflater = zlib.decompressobj(wbits)
    try:
        # Inflate at most one byte past the cap: a bomb costs the cap, not its size.
        out = inflater.decompress(env.content, MAX_CONTENT_BYTES + 1)
    except zlib.error as exc:
        raise Unreadable(f"compressed content does not inflate: {exc}") from None
    if len(out) > MAX_CONTENT_BYTES:
        raise Unreadable(f"content inflates to more than {MAX_CONTENT_BYTES} bytes")
    return out


def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _reject_constant(name: str) -> Any:
    raise Unreadable(f"JSON holds {name}, which JSON cannot carry")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Unreadable(f"JSON number {text[:40]} is out of range")
    return value


def _depth_within(raw: str, limit: int) -> bool:
    """Whether brackets outside strings nest at most `limit` deep (checked before parsing,
    so no parser recursion is ever at risk)."""
    if raw.count("[") + raw.count("{") <= limit:
        return True
    depth = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def normalise_json(raw: str) -> str:
    """The canonical JSON text for a peer's data; Unreadable when JSON cannot carry it."""
    if not _depth_within(raw, MAX_JSON_DEPTH):
        raise Unreadable(f"JSON nested deeper than {MAX_JSON_DEPTH}")
    try:
        value = json.loads(raw, parse_float=_finite, parse_constant=_reject_constant)
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        # A lone surrogate (from a \ud800 escape) is not Unicode: no transport carries it.
        text.encode("utf-8")
    except Unreadable:
        raise
    except UnicodeEncodeError:
        raise Unreadable("JSON holds a lone surrogate, which is not Unicode") from None
    except (ValueError, RecursionError) as exc:
        raise Unreadable(f"not JSON: {str(exc)[:200]}") from None
    return text


def _fill(env: content_pb2.EncodedContent) -> tuple[str | None, str | None]:
    """(text, data_json) for the types cone reads; (None, None) otherwise."""
    kind = (env.type.authority_id, env.type.type_id)
    if kind == ("xmtp.org", "text") or kind == ("xmtp.org", "markdown"):
        return _within_cap(_utf8(_content_bytes(env))), None
    if kind == ("cone.chat", "data"):
        return None, _within_cap(normalise_json(_utf8(_content_bytes(env))))
    return None, None


def _within_cap(kept: str) -> str:
    # What is kept can outgrow what arrived (a replaced invalid byte takes three, a
    # canonical JSON number can be longer than the peer's): the cap is on what is kept.
    if len(kept) > MAX_CONTENT_BYTES // 4 and len(kept.encode()) > MAX_CONTENT_BYTES:
        raise Unreadable(f"content larger than {MAX_CONTENT_BYTES} bytes once decoded")
    return kept


def _fallback(env: content_pb2.EncodedContent) -> str | None:
    if not env.HasField("fallback"):
        return None
    return str(env.fallback)[:MAX_FALLBACK_CHARS]


def decode(raw: bytes) -> Decoded:
    """Read an incoming envelope; never raises (what it cannot read is `unreadable`)."""
    try:
        return _decode(raw)
    except Exception as exc:  # a peer's bytes must never stop ingest; keep the reason
        return Decoded(content_type="unknown", unreadable=f"{type(exc).__name__}: {exc}"[:300])


def _decode(raw: bytes) -> Decoded:
    try:
        env = content_pb2.EncodedContent.FromString(raw)
    except Exception:  # a peer's malformed bytes must not stop ingest
        return Decoded(content_type="unknown", unreadable="not an XMTP content envelope")
    ctype = type_string(env.type)
    key = env.parameters.get(KEY_PARAMETER) or None
    if len(ctype) > MAX_LABEL_CHARS:
        return Decoded(
            content_type=ctype[:MAX_LABEL_CHARS],
            fallback=_fallback(env),
            unreadable=f"content type longer than {MAX_LABEL_CHARS} characters",
        )
    if key is not None and len(key) > MAX_LABEL_CHARS:
        key = None  # not a key cone ever sends: no deduplication on it
    base = f"{env.type.authority_id}/{env.type.type_id}"
    if base in PROTOCOL_ONLY:
        return Decoded(content_type=ctype, protocol_only=True, send_key=key)
    head = Decoded(content_type=ctype, fallback=_fallback(env), send_key=key)
    body = env
    if base == "xmtp.org/reply":
        reference = env.parameters.get("reference") or None
        head = replace(head, reply_to=reference[:MAX_LABEL_CHARS] if reference else None)
        try:
            body = content_pb2.EncodedContent.FromString(_content_bytes(env))
        except Unreadable as exc:
            return replace(head, unreadable=str(exc))
        except Exception:  # same reason as above
            return replace(head, unreadable="the reply's inner content is not an envelope")
    try:
        text, data_json = _fill(body)
    except Unreadable as exc:
        return replace(head, unreadable=str(exc))
    if text is None and data_json is None:
        return head
    return replace(head, text=text, data_json=data_json, fallback=None)
