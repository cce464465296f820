"""Incoming envelopes read defensively: what cone keeps of a peer's content, within caps."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from enum import StrEnum
from typing import Final, TypeVar

from cone import limits
from cone.core.content._json import normalise_json
from cone.core.content._types import (
    ACTIONS,
    JSON_TYPES,
    KEY_PARAMETER,
    MULTI_REMOTE_ATTACHMENT,
    PROTOCOL_ONLY,
    REMOTE_ATTACHMENT,
    SCHEMAS,
    AttachmentPart,
    Decoded,
    Reaction,
    ReactionAction,
    ReactionSchema,
    Remote,
    Unreadable,
    type_string,
)
from conepb.xmtpcontent import content_pb2

# The most content one stored message keeps (text or JSON, after decompression):
# above XMTP's own message limit for plain content, far below what a transport carries.
MAX_CONTENT_BYTES: Final = limits.CONTENT_MAX_BYTES
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
            action=ACTIONS.get(r.action, ReactionAction.UNKNOWN),
            schema=SCHEMAS.get(r.schema, ReactionSchema.UNKNOWN),
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
        # ASCII digits only: "²" is a digit to str.isdigit, not to int().
        length=int(length) if length.isascii() and length.isdigit() and len(length) < 19 else None,
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
