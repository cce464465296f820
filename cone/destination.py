"""How a destination reads before anything is looked up: the syntax half of the one
destination resolver, shared by the core (`cone.core.destinations`, which does the
lookups and the precedence) and the CLI (which refuses malformed input before it
reaches, or starts, a core).

A destination (`to`, `members`) is a saved contact name, a conversation id, an inbox
id (64 hex digits) or an Ethereum address (0x and 40 hex digits). The name and id
patterns are the proto's own (`ConnectRequest.name`, every id field).
"""

from __future__ import annotations

import re
from typing import Final

from cone.errors import InvalidArgument
from cone.rules import field_rules

_NAME: Final = re.compile(field_rules("ConnectRequest", "name").string.pattern)
_ID: Final = re.compile(field_rules("AcceptRequest", "conversation_id").string.pattern)
_ADDRESS: Final = re.compile(r"0x[0-9a-f]{40}")
INBOX_ID_CHARS: Final = 64


def is_name(value: str) -> bool:
    """Whether `value` can be a contact name (a saved one wins over every other reading)."""
    return _NAME.fullmatch(value) is not None


def is_id(value: str) -> bool:
    """Whether `value` reads as a hex id (a conversation id, or 64 digits: an inbox id);
    any case."""
    return _ID.fullmatch(value.lower()) is not None


def is_address(value: str) -> bool:
    """Whether `value` is an Ethereum address; any case."""
    return _ADDRESS.fullmatch(value.lower()) is not None


def check(value: str, field: str = "to") -> None:
    """InvalidArgument(not_a_destination) when `value` is none of the four readings."""
    if is_name(value) or is_id(value) or is_address(value):
        return
    if value[:2].lower() == "0x":
        what = "not an address: an address is 0x and 40 hex digits"
    else:
        what = (
            "not an address (0x and 40 hex digits), an inbox id (64 hex digits), a saved "
            "contact name or a conversation id"
        )
    raise InvalidArgument(f"{field} {value!r} is {what}", reason="not_a_destination", field=field)


def own_inbox(value: str, field: str = "to") -> InvalidArgument:
    """The refusal of this identity's own address or inbox id as a destination."""
    return InvalidArgument(
        f"{field} {value!r} is this identity itself: cone sends only to others (give a "
        "peer's address, inbox id, contact name or conversation id)",
        reason="own_inbox",
        field=field,
    )
