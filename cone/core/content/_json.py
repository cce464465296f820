"""A peer's JSON made canonical, or refused when not every interface can carry it."""

from __future__ import annotations

import json
import math
from typing import Any, Final

from cone.core.content._types import Unreadable

# The deepest JSON nesting kept: deeper data is unreadable (every JSON library
# downstream recurses, and no agent needs more).
MAX_JSON_DEPTH: Final = 64


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
