"""Validation of request fields the proto cannot express (ranges, patterns).

Errors name the field in its JSON form, so every facade reports the same name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cone import limits
from cone.errors import InvalidArgument

_CONSUMER = re.compile(limits.CONSUMER_PATTERN)
_NAME = re.compile(limits.CONTACT_NAME_PATTERN)
_HEX = re.compile(limits.HEX_ID_PATTERN)
HEX = _HEX


def consumer(value: str) -> str:
    """The consumer name, `default` when empty."""
    if not value:
        return limits.DEFAULT_CONSUMER
    if not _CONSUMER.match(value):
        raise InvalidArgument(
            "consumer must be 1–64 letters, digits, '.', '_', ':' or '-'", field="consumer"
        )
    return value


def receive_limit(value: int | None) -> int:
    """The batch size, 50 when absent."""
    if value is None:
        return limits.RECEIVE_LIMIT_DEFAULT
    if not limits.RECEIVE_LIMIT_MIN <= value <= limits.RECEIVE_LIMIT_MAX:
        raise InvalidArgument(
            f"limit must be between {limits.RECEIVE_LIMIT_MIN} and {limits.RECEIVE_LIMIT_MAX}",
            field="limit",
        )
    return value


def wait_ms(value: int) -> int:
    """The long-poll wait."""
    if not 0 <= value <= limits.WAIT_MS_MAX:
        raise InvalidArgument(f"waitMs must be between 0 and {limits.WAIT_MS_MAX}", field="waitMs")
    return value


def hex_id(value: str, field: str) -> str:
    """A conversation or message id: lowercase hex."""
    if not _HEX.match(value):
        raise InvalidArgument(f"{field} must be a lowercase hex id", field=field)
    return value


def hex_ids(values: Sequence[str], field: str, *, at_least: int = 0) -> list[str]:
    """A list of hex ids, bounded."""
    if not at_least <= len(values) <= limits.ACK_IDS_MAX:
        raise InvalidArgument(f"{field} must hold {at_least}–{limits.ACK_IDS_MAX} ids", field=field)
    return [hex_id(v, field) for v in values]


def contact_name(value: str | None) -> str | None:
    """An optional contact name."""
    if value is None:
        return None
    if not _NAME.match(value):
        raise InvalidArgument(
            "name must start with a letter and hold 1–64 letters, digits, '.', '_' or '-'",
            field="name",
        )
    return value


def destination(value: str, field: str = "to") -> str:
    """A non-empty destination string."""
    if not value or len(value) > 256:
        raise InvalidArgument(
            f"{field} must be an address, inbox id, contact name or conversation id", field=field
        )
    return value
