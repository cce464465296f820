"""The sync role: what the node has for this identity's conversations, and its fake.

`Engine` is the real `Sync` (cone/engine/_network.py); `MemorySync` fails each call
while its `MemoryXmtp` is offline and has nothing to fetch otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cone.engine.roles.memory import MemoryXmtp
from cone.engine.values import SyncSummary
from cone.errors import Unavailable


class Sync(Protocol):
    """Syncs with the node, and a restored copy's repairs of its groups' state."""

    async def sync_all(self) -> SyncSummary | None:
        """A full sync and what it did (None: not known); Unavailable(sync_failed)
        when it fails."""
        ...

    async def sync_conversation(self, conversation_id: str) -> None:
        """Fetch one conversation's new messages."""
        ...

    async def own_commits_lost(self, conversation_id: str) -> int:
        """How many commits this installation made that libxmtp could not apply here
        (a restored copy meeting the original's commits after its backup)."""
        ...

    async def rotate_keys(self, conversation_id: str) -> None:
        """Publish the key update libxmtp has due in a conversation (a restored copy's);
        returns once it is applied."""
        ...


class MemorySync(MemoryXmtp):
    """An in-memory `Sync`: the messages are stored already; offline, each call fails."""

    async def sync_all(self) -> SyncSummary | None:
        if not self.online:
            raise Unavailable("syncing failed: the memory network is down", reason="sync_failed")
        return None

    async def sync_conversation(self, conversation_id: str) -> None:
        self.reach("syncing a conversation")

    async def own_commits_lost(self, conversation_id: str) -> int:
        return 0

    async def rotate_keys(self, conversation_id: str) -> None:
        self.reach("rotating a conversation's keys")


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[Sync] = MemorySync


__all__ = ["MemorySync", "Sync"]
