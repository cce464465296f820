"""Which conversation a command's argument names: whatever `cone send` takes.

`messages`, `reply`, `accept`, `block`, `unblock` and the `group` actions take a
conversation id, or what `send` takes besides: a saved contact name, an inbox id or an
address, each naming the direct conversation with that peer. The core reads it (the
`resolve` method, read-only: it never makes or accepts a conversation, as `send` and
`connect` do); a malformed argument exits 2 here, before a core is reached, and a
conversation id needs no lookup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from cone import destination

JsonObject = dict[str, Any]
Call = Callable[[str, JsonObject], Awaitable[JsonObject]]

FIELD: Final = "conversationId"


async def conversation_id(call: Call, value: str) -> str:
    """The conversation `value` names (see the module docstring); exit 2 when it reads
    as nothing, NotFound when it names no conversation this inbox records."""
    destination.check(value, FIELD)
    lowered = value.lower()
    if (
        not destination.is_name(value)
        and destination.is_id(lowered)
        and len(lowered) != destination.INBOX_ID_CHARS
    ):
        # Only a conversation id, which `resolve` gives back as it is: the command's
        # own parameters are checked before a core is reached, as without a lookup.
        return lowered
    return str((await call("resolve", {"to": value}))["conversationId"])


__all__ = ["FIELD", "conversation_id"]
