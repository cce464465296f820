"""The protocol's limits, in one place for the core's validation and the facades' schemas."""

from __future__ import annotations

from typing import Final

RECEIVE_LIMIT_MIN: Final = 1
RECEIVE_LIMIT_MAX: Final = 1000
RECEIVE_LIMIT_DEFAULT: Final = 50
WAIT_MS_MAX: Final = 30_000
ACK_IDS_MAX: Final = 1000
KEY_MAX_CHARS: Final = 256
DESTINATION_MAX_CHARS: Final = 256
TEXT_MAX_BYTES: Final = 512 * 1024
DATA_MAX_BYTES: Final = 512 * 1024
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
CONSUMER_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
CONTACT_NAME_PATTERN: Final = r"^[A-Za-z][A-Za-z0-9._-]{0,63}$"
HEX_ID_PATTERN: Final = r"^[0-9a-f]{2,128}$"
DEFAULT_CONSUMER: Final = "default"
# The largest file `send` and `reply` attach inline (XMTP's guidance for inline
# attachments is under 1 MB; larger files go as remote attachments).
ATTACHMENT_MAX_BYTES: Final = 1_000_000
# Receive hands a file's bytes inline when it is at most this large and the batch's
# inline bytes stay within the budget; otherwise the `attachment` call fetches them.
ATTACHMENT_INLINE_MAX_BYTES: Final = 256 * 1024
RECEIVE_INLINE_BUDGET_BYTES: Final = 1024 * 1024
# The largest remote attachment cone downloads (its encrypted payload).
REMOTE_ATTACHMENT_MAX_BYTES: Final = 10 * 1024 * 1024
