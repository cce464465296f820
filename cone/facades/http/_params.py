"""The event stream's query parameters and headers, range-checked where they enter.

Every number a client sends is checked here, before it reaches the core: a bad one is
a 400 naming the parameter, never a 500 (an `int()` of `²` or of 5,000 digits) nor a
value the store cannot hold (a sequence past 2^63-1) nor a NaN that ends a stream.
"""

from __future__ import annotations

import math
import re
from typing import Final

HEARTBEAT_S: Final = 15.0
HEARTBEAT_MIN_S: Final = 0.5
HEARTBEAT_MAX_S: Final = 30.0
# The largest inbox sequence: SQLite's INTEGER is a signed 64-bit number.
MAX_SEQUENCE: Final = 2**63 - 1
# ASCII digits only (str.isdigit also takes '²' and '٣'); 19 digits hold 2^63-1.
_SEQUENCE: Final = re.compile(r"[0-9]{1,19}")
_NUMBER: Final = re.compile(r"[0-9]{1,3}(\.[0-9]{1,6})?")


class BadParameter(ValueError):
    """A parameter out of its range or shape; the message names it (a 400's body)."""


def cursor(header: str | None, query: str | None) -> int | None:
    """The sequence to resume after: `Last-Event-ID`, else `?lastEventId=`, else None."""
    name, raw = ("Last-Event-ID", header) if header else ("lastEventId", query)
    if not raw:
        return None
    if _SEQUENCE.fullmatch(raw) is None or int(raw) > MAX_SEQUENCE:
        raise BadParameter(f"{name} must be a message's sequence (0 to {MAX_SEQUENCE})")
    return int(raw)


def heartbeat(raw: str | None) -> float:
    """Seconds between heartbeats: `?heartbeat=` (0.5 to 30), else 15."""
    if raw is None or raw == "":
        return HEARTBEAT_S
    value = float(raw) if _NUMBER.fullmatch(raw) else math.nan
    if not HEARTBEAT_MIN_S <= value <= HEARTBEAT_MAX_S:
        raise BadParameter(
            f"heartbeat must be a number of seconds from {HEARTBEAT_MIN_S:g} to {HEARTBEAT_MAX_S:g}"
        )
    return value


__all__ = ["MAX_SEQUENCE", "BadParameter", "cursor", "heartbeat"]
