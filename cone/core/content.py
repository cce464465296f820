"""Message content on the wire: what cone sends and how it reads what arrives.

cone speaks XMTP's content envelope (`EncodedContent`, XIP-5):

| cone field   | XMTP content type           | content bytes                                  |
| ------------ | --------------------------- | ---------------------------------------------- |
| `text`       | `xmtp.org/text:1.0`         | UTF-8 text                                     |
| `markdown`   | `xmtp.org/markdown:1.0`     | UTF-8 markdown                                 |
| `data`       | `cone.chat/data:1.0`        | UTF-8 JSON; fallback is a short readable text  |
| `reaction`   | `xmtp.org/reaction:2.0`     | `ReactionV2` protobuf (1.0, JSON, is read too) |
| `attachment` | `xmtp.org/attachment:1.0`   | the file's bytes; parameters `filename`,       |
|              |                             | `mimeType`                                     |
| `replyTo`    | `xmtp.org/reply:1.0`        | the inner EncodedContent; parameters carry the |
|              |                             | referenced message id and inner content type   |

Read only: remote attachments (`xmtp.org/remoteStaticAttachment:1.0`, one file by URL,
downloaded and decrypted by `cone.core.attachments`), multi remote attachments, and
the JSON types of `JSON_TYPES` (transaction reference, wallet send calls, actions,
intent), kept as canonical JSON in `content_json`.

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
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final, TypeVar

from cone import limits
from conepb.xmtpcontent import content_pb2

TEXT: Final = "xmtp.org/text:1.0"
MARKDOWN: Final = "xmtp.org/markdown:1.0"
DATA: Final = "cone.chat/data:1.0"
REACTION: Final = "xmtp.org/reaction:2.0"
ATTACHMENT: Final = "xmtp.org/attachment:1.0"
REPLY: Final = "xmtp.org/reply:1.0"
# Content types whose content is JSON defined by their codec: kept as `content_json`.
JSON_TYPES: Final = frozenset(
    {
        "xmtp.org/transactionReference",
        "xmtp.org/walletSendCalls",
        "coinbase.com/actions",
        "coinbase.com/intent",
    }
)
REMOTE_ATTACHMENT: Final = "xmtp.org/remoteStaticAttachment"
MULTI_REMOTE_ATTACHMENT: Final = "xmtp.org/multiRemoteStaticAttachment"
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
# The longest attachment file name kept.
MAX_FILENAME_CHARS: Final = 1024
# The most files one multi remote attachment may name.
MAX_ATTACHMENTS: Final = 32
# The longest remote attachment URL kept.
MAX_URL_CHARS: Final = 2048


class ReactionAction(StrEnum):
    """What a reaction does (a received one may be UNKNOWN)."""

    ADDED = "added"
    REMOVED = "removed"
    UNKNOWN = "unknown"


class ReactionSchema(StrEnum):
    """How a reaction's emoji is written (a received one may be UNKNOWN)."""

    UNICODE = "unicode"
    SHORTCODE = "shortcode"
    CUSTOM = "custom"
    UNKNOWN = "unknown"


# ReactionV2's numbers on the wire.
_ACTIONS: Final = {1: ReactionAction.ADDED, 2: ReactionAction.REMOVED}
_SCHEMAS: Final = {1: ReactionSchema.UNICODE, 2: ReactionSchema.SHORTCODE, 3: ReactionSchema.CUSTOM}


@dataclass(frozen=True)
class Reaction:
    """A reaction, sent or received."""

    message_id: str
    emoji: str
    action: ReactionAction = ReactionAction.ADDED
    schema: ReactionSchema = ReactionSchema.UNICODE
    reference_inbox_id: str = ""


@dataclass(frozen=True)
class Remote:
    """Where a remote attachment's encrypted bytes are and how to open them (XMTP's
    remote attachment codec: AES-256-GCM under an HKDF-SHA256 key)."""

    url: str
    content_digest: str
    secret: bytes
    salt: bytes
    nonce: bytes
    scheme: str
    content_length: int | None


@dataclass(frozen=True)
class AttachmentPart:
    """One file of a message: inline bytes, or a remote reference to download."""

    filename: str
    mime_type: str
    data: bytes | None = None
    remote: Remote | None = None


@dataclass(frozen=True)
class Outgoing:
    """The content of one outgoing message: exactly one field set."""

    text: str | None = None
    markdown: str | None = None
    data_json: str | None = None
    reaction: Reaction | None = None
    attachment: AttachmentPart | None = None

    @property
    def kind(self) -> str:
        """The content type a send key is bound to."""
        if self.text is not None:
            return TEXT
        if self.markdown is not None:
            return MARKDOWN
        if self.data_json is not None:
            return DATA
        if self.reaction is not None:
            return REACTION
        return ATTACHMENT


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
    reaction: Reaction | None = None
    attachments: tuple[AttachmentPart, ...] = field(default=())
    # True for a multi remote attachment (`attachments` is a list on the wire).
    multi: bool = False
    content_json: str | None = None


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


def _inner_markdown(markdown: str) -> content_pb2.EncodedContent:
    return content_pb2.EncodedContent(
        type=_type_id("xmtp.org", "markdown", 1, 0),
        parameters={"encoding": "UTF-8"},
        content=markdown.encode(),
    )


def _inner_reaction(r: Reaction) -> content_pb2.EncodedContent:
    action = {v: k for k, v in _ACTIONS.items()}[r.action]
    schema = {v: k for k, v in _SCHEMAS.items()}[r.schema]
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


def _content_bytes(env: content_pb2.EncodedContent, limit: int = MAX_CONTENT_BYTES) -> bytes:
    if not env.HasField("compression"):
        if len(env.content) > limit:
            raise Unreadable(f"content larger than {limit} bytes")
        return bytes(env.content)
    wbits = -15 if env.compression == content_pb2.COMPRESSION_DEFLATE else 31
    inflater = zlib.decompressobj(wbits)
    try:
        # Inflate at most one byte past the cap: a bomb costs the cap, not its size.
        out = inflater.decompress(env.content, limit + 1)
    except zlib.error as exc:
        raise Unreadable(f"compressed content does not inflate: {exc}") from None
    if len(out) > limit:
        raise Unreadable(f"content inflates to more than {limit} bytes")
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


def _label(value: str, limit: int = MAX_LABEL_CHARS) -> str:
    return value[:limit]


E = TypeVar("E", bound=StrEnum)


def _member(enum: type[E], value: str, unknown: E) -> E:
    """The member named `value`, or `unknown` (also for a literal "unknown")."""
    try:
        return enum(value)
    except ValueError:
        return unknown


def _reaction(env: content_pb2.EncodedContent) -> Reaction:
    raw = _content_bytes(env)
    if env.type.version_major >= 2:
        try:
            r = content_pb2.ReactionV2.FromString(raw)
        except Exception:  # a peer's malformed bytes
            raise Unreadable("the reaction is not a ReactionV2 message") from None
        return Reaction(
            message_id=_label(r.reference),
            emoji=_label(r.content),
            action=_ACTIONS.get(r.action, ReactionAction.UNKNOWN),
            schema=_SCHEMAS.get(r.schema, ReactionSchema.UNKNOWN),
            reference_inbox_id=_label(r.reference_inbox_id),
        )
    # 1.0: JSON {reference, referenceInboxId?, action, content, schema}.
    value = json.loads(normalise_json(_utf8(raw)))
    if not isinstance(value, dict):
        raise Unreadable("the reaction is not a JSON object")

    def text(name: str) -> str:
        item = value.get(name)
        return _label(item) if isinstance(item, str) else ""

    return Reaction(
        message_id=text("reference"),
        emoji=text("content"),
        action=_member(ReactionAction, text("action"), ReactionAction.UNKNOWN),
        schema=_member(ReactionSchema, text("schema"), ReactionSchema.UNKNOWN),
        reference_inbox_id=text("referenceInboxId"),
    )


def _attachment(env: content_pb2.EncodedContent, limit: int = MAX_CONTENT_BYTES) -> AttachmentPart:
    return AttachmentPart(
        filename=_label(env.parameters.get("filename", ""), MAX_FILENAME_CHARS),
        mime_type=_label(env.parameters.get("mimeType", "")),
        data=_content_bytes(env, limit),
    )


def _remote(
    url: str,
    digest: str,
    secret: bytes,
    salt: bytes,
    nonce: bytes,
    scheme: str,
    length: int | None,
    filename: str,
) -> AttachmentPart:
    if len(url) > MAX_URL_CHARS or len(scheme) > MAX_LABEL_CHARS:
        raise Unreadable(f"the remote attachment's URL is over {MAX_URL_CHARS} characters")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()):
        raise Unreadable("the remote attachment's content digest is not a SHA-256 in hex")
    if (len(secret), len(salt), len(nonce)) != (32, 32, 12):
        raise Unreadable("the remote attachment's secret, salt or nonce has the wrong length")
    remote = Remote(url, digest.lower(), secret, salt, nonce, scheme, length)
    return AttachmentPart(
        filename=_label(filename, MAX_FILENAME_CHARS), mime_type="", remote=remote
    )


def _hex_param(env: content_pb2.EncodedContent, name: str) -> bytes:
    try:
        return bytes.fromhex(env.parameters.get(name, ""))
    except ValueError:
        raise Unreadable(f"the remote attachment's {name} is not hex") from None


def _remote_attachment(env: content_pb2.EncodedContent) -> AttachmentPart:
    p = env.parameters
    length = p.get("contentLength", "")
    return _remote(
        url=_utf8(_content_bytes(env)),
        digest=p.get("contentDigest", ""),
        secret=_hex_param(env, "secret"),
        salt=_hex_param(env, "salt"),
        nonce=_hex_param(env, "nonce"),
        scheme=p.get("scheme", ""),
        length=int(length) if length.isdigit() and len(length) < 19 else None,
        filename=p.get("filename", ""),
    )


def _multi_remote_attachment(env: content_pb2.EncodedContent) -> tuple[AttachmentPart, ...]:
    try:
        multi = content_pb2.MultiRemoteAttachment.FromString(_content_bytes(env))
    except Unreadable:
        raise
    except Exception:  # a peer's malformed bytes
        raise Unreadable("the multi remote attachment is not a protobuf message") from None
    if len(multi.attachments) > MAX_ATTACHMENTS:
        raise Unreadable(f"the multi remote attachment names more than {MAX_ATTACHMENTS} files")
    return tuple(
        _remote(
            url=a.url,
            digest=a.content_digest,
            secret=a.secret,
            salt=a.salt,
            nonce=a.nonce,
            scheme=a.scheme,
            length=a.content_length if a.HasField("content_length") else None,
            filename=a.filename,
        )
        for a in multi.attachments
    )


def attachment_of(payload: bytes, limit: int) -> AttachmentPart:
    """The file in a decrypted remote attachment payload (an `xmtp.org/attachment`
    envelope) of at most `limit` bytes, inflated; Unreadable when it is not one."""
    try:
        env = content_pb2.EncodedContent.FromString(payload)
    except Exception:  # the remote server's bytes, decrypted: still a peer's
        raise Unreadable("the decrypted payload is not an XMTP content envelope") from None
    if (env.type.authority_id, env.type.type_id) != ("xmtp.org", "attachment"):
        raise Unreadable(
            f"the decrypted payload is {type_string(env.type)[:80]}, not an attachment"
        )
    return _attachment(env, limit)


def _fill(env: content_pb2.EncodedContent, head: Decoded) -> Decoded:
    """`head` with the content of the types cone reads; unchanged for others."""
    kind = f"{env.type.authority_id}/{env.type.type_id}"
    if kind in ("xmtp.org/text", "xmtp.org/markdown"):
        return replace(head, text=_within_cap(_utf8(_content_bytes(env))))
    if kind == "cone.chat/data":
        return replace(head, data_json=_within_cap(normalise_json(_utf8(_content_bytes(env)))))
    if kind == "xmtp.org/reaction":
        return replace(head, reaction=_reaction(env))
    if kind == "xmtp.org/attachment":
        return replace(head, attachments=(_attachment(env),))
    if kind == REMOTE_ATTACHMENT:
        return replace(head, attachments=(_remote_attachment(env),))
    if kind == MULTI_REMOTE_ATTACHMENT:
        return replace(head, attachments=_multi_remote_attachment(env), multi=True)
    if kind in JSON_TYPES:
        return replace(head, content_json=_within_cap(normalise_json(_utf8(_content_bytes(env)))))
    return head


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
            content_type=_label(ctype),
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
        head = replace(head, reply_to=_label(reference) if reference else None)
        try:
            body = content_pb2.EncodedContent.FromString(_content_bytes(env))
        except Unreadable as exc:
            return replace(head, unreadable=str(exc))
        except Exception:  # same reason as above
            return replace(head, unreadable="the reply's inner content is not an envelope")
    try:
        return _fill(body, head)
    except Unreadable as exc:
        return replace(head, unreadable=str(exc))
