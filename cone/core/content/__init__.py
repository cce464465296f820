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

The package in four parts: `_types` (the content types cone names and the records),
`_encoding` (what cone sends), `_decoding` (what cone keeps of what arrives) and
`_json` (a peer's JSON made canonical).
"""

from __future__ import annotations

from cone.core.content._decoding import (
    MAX_ATTACHMENTS,
    MAX_CONTENT_BYTES,
    MAX_FALLBACK_CHARS,
    MAX_FILENAME_CHARS,
    MAX_LABEL_CHARS,
    MAX_URL_CHARS,
    attachment_of,
    decode,
)
from cone.core.content._encoding import encode, reply_inner_type
from cone.core.content._json import MAX_JSON_DEPTH, normalise_json
from cone.core.content._types import (
    ATTACHMENT,
    DATA,
    JSON_TYPES,
    KEY_PARAMETER,
    MARKDOWN,
    MULTI_REMOTE_ATTACHMENT,
    PROTOCOL_ONLY,
    REACTION,
    REMOTE_ATTACHMENT,
    REPLY,
    TEXT,
    AttachmentPart,
    Decoded,
    Outgoing,
    Reaction,
    ReactionAction,
    ReactionSchema,
    Remote,
    Unreadable,
    type_string,
)

__all__ = [
    "ATTACHMENT",
    "DATA",
    "JSON_TYPES",
    "KEY_PARAMETER",
    "MARKDOWN",
    "MAX_ATTACHMENTS",
    "MAX_CONTENT_BYTES",
    "MAX_FALLBACK_CHARS",
    "MAX_FILENAME_CHARS",
    "MAX_JSON_DEPTH",
    "MAX_LABEL_CHARS",
    "MAX_URL_CHARS",
    "MULTI_REMOTE_ATTACHMENT",
    "PROTOCOL_ONLY",
    "REACTION",
    "REMOTE_ATTACHMENT",
    "REPLY",
    "TEXT",
    "AttachmentPart",
    "Decoded",
    "Outgoing",
    "Reaction",
    "ReactionAction",
    "ReactionSchema",
    "Remote",
    "Unreadable",
    "attachment_of",
    "decode",
    "encode",
    "normalise_json",
    "reply_inner_type",
    "type_string",
]
