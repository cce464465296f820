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
