"""Sizes and budgets of the store and the receive path, and the defaults the core applies.

Request rules (ranges, lengths, patterns) are not here: they are the buf.validate
annotations of proto/conepb/v1/cone.proto (read them with `cone.rules.field_rules`).
"""

from __future__ import annotations

from typing import Final

#: A Receive, Peek, Conversations or Messages page when `limit` is absent.
RECEIVE_LIMIT_DEFAULT: Final = 50
#: The most text or JSON data one stored message keeps, as UTF-8 after decompression
#: and decoding; larger incoming content is stored as unreadable (cone.core.content).
CONTENT_MAX_BYTES: Final = 1024 * 1024
#: The most one stored message may carry, all its fields together as UTF-8: its content
#: plus at most 64 KiB of the rest (fallback ≤ 4,096 characters, labels ≤ 256, ids).
MESSAGE_MAX_BYTES: Final = CONTENT_MAX_BYTES + 64 * 1024
#: A receive batch stops adding messages once their size (`inbox.message_size`) would
#: pass this; it always holds at least one message. With JSON's worst escaping (6 bytes
#: per control character, 13 through MCP's text-plus-structured result) a batch stays
#: under 16 MiB on every wire, and under gRPC's default 4 MiB receive limit.
RECEIVE_BATCH_BYTES: Final = 1024 * 1024
#: The consumer when none is given.
DEFAULT_CONSUMER: Final = "default"
# Receive hands a file's bytes inline when it is at most this large and the batch's
# inline bytes stay within the budget; otherwise the `attachment` call fetches them.
ATTACHMENT_INLINE_MAX_BYTES: Final = 256 * 1024
RECEIVE_INLINE_BUDGET_BYTES: Final = 1024 * 1024
# The largest remote attachment cone downloads (its encrypted payload).
REMOTE_ATTACHMENT_MAX_BYTES: Final = 10 * 1024 * 1024
