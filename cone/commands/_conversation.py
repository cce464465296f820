"""Which conversation a command's argument names: whatever `cone send` takes.

`messages`, `reply`, `accept`, `block`, `unblock` and the `group` actions take a
conversation id, or what `send` takes besides: a saved contact name, an inbox id or an
address, each naming the direct conversation with that peer. The readings and their
precedence are the core's (docs/messages.md, "Destinations"; `cone.destination`): a
saved contact name first, then a conversation id, an inbox id (64 hex digits, unless
a conversation has them), an address. The direct conversation is found with read-only
calls (`contacts`, then the `conversations` listing), never made or accepted: a command
that reads or decides must not start a conversation, as `send` and `connect` do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from cone import destination
from cone.errors import NotFound

JsonObject = dict[str, Any]
Call = Callable[[str, JsonObject], Awaitable[JsonObject]]

FIELD: Final = "conversationId"
# The listing's largest page (ConversationsRequest.limit).
_PAGE: Final = 1000


async def conversation_id(call: Call, value: str) -> str:
    """The conversation `value` names (see the module docstring); exit 2 when it reads
    as nothing, NotFound when it names no conversation this inbox records."""
    destination.check(value, FIELD)
    if destination.is_name(value):
        contacts = (await call("contacts", {}))["contacts"]
        for contact in contacts:
            if contact.get("name") == value:
                return str(contact["conversationId"])
    lowered = value.lower()
    if destination.is_id(lowered) and len(lowered) != destination.INBOX_ID_CHARS:
        return lowered
    if destination.is_id(lowered) or destination.is_address(lowered):
        found = await _direct(call, lowered)
        if found is not None:
            return found
        raise NotFound(
            f"no conversation with {value} is known to this inbox: `cone send` or "
            "`cone connect` starts one",
            reason="unknown_destination",
            field=FIELD,
        )
    raise NotFound(
        f"no contact is saved as {value!r}: give a conversation id, a saved contact name, "
        "an inbox id or an address (`cone contacts` lists the names)",
        reason="unknown_destination",
        field=FIELD,
    )


async def _direct(call: Call, peer: str) -> str | None:
    """The conversation with id `peer` (64 hex digits), else the direct conversation
    whose peer has this inbox id or address: a saved contact's first, else the newest
    listed."""
    for contact in (await call("contacts", {}))["contacts"]:
        if peer in (contact.get("inboxId"), (contact.get("address") or "").lower()):
            return str(contact["conversationId"])
    direct: str | None = None
    params: JsonObject = {"limit": _PAGE}
    while True:
        page = await call("conversations", params)
        for c in page["conversations"]:
            if c["conversationId"] == peer:
                return peer
            peers = (c.get("peerInboxId"), (c.get("peerAddress") or "").lower())
            if direct is None and c.get("conversationType") == "dm" and peer in peers:
                direct = str(c["conversationId"])
        if not page.get("cursor"):
            return direct
        params = {"limit": _PAGE, "cursor": page["cursor"]}


__all__ = ["FIELD", "conversation_id"]
