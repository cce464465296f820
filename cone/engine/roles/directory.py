"""The directory role: who is on XMTP, and the DM with each inbox; and its fake.

`Engine` is the real `Directory` (cone/engine/_network.py: lookups fall back on
libxmtp's local record when the network is down); `MemoryDirectory` looks in its
`MemoryXmtp`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cone.engine.roles.memory import MemoryXmtp
from cone.engine.values import ConversationInfo


class Directory(Protocol):
    """Inbox lookups and DMs."""

    async def resolve(self, identifier: str) -> str | None:
        """The inbox id of an address or inbox id, or None when it is not on XMTP."""
        ...

    async def addresses_of(self, inbox_id: str) -> list[str]:
        """The addresses of an inbox ([] when unknown)."""
        ...

    async def find_or_create_dm(self, inbox_id: str) -> ConversationInfo:
        """The DM with an inbox, created if there is none."""
        ...


class MemoryDirectory(MemoryXmtp):
    """An in-memory `Directory`: an address resolves while online; an inbox id known
    resolves offline too, as libxmtp's local record does; a new DM needs the network."""

    async def resolve(self, identifier: str) -> str | None:
        if identifier.startswith("0x"):
            self.reach("resolving")
            return self.inbox_by_address.get(identifier)
        if identifier in self.addresses_by_inbox:
            return identifier
        self.reach(f"resolving {identifier}")
        return None

    async def addresses_of(self, inbox_id: str) -> list[str]:
        return list(self.addresses_by_inbox.get(inbox_id, []))

    async def find_or_create_dm(self, inbox_id: str) -> ConversationInfo:
        cid = self.dm_id(inbox_id)
        if cid not in self.held:
            self.reach(f"creating the DM with {inbox_id}")
            self.dm(inbox_id)
        info = self.held[cid].info
        consent = self.conversation_consent.get(cid, info.consent)
        return ConversationInfo(info.id, info.is_group, info.peer_inbox_id, consent)


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[Directory] = MemoryDirectory


__all__ = ["Directory", "MemoryDirectory"]
