"""The reads role: libxmtp's local database as the core reads it, and its fake.

Nothing here goes to the network. `Engine` is the real `Reads` (cone/engine/_reads.py,
_stamps.py, deletions.py); `MemoryReads` reads a `MemoryXmtp`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from cone.engine.roles.memory import MemoryXmtp
from cone.engine.values import ConversationInfo, ListedConversation, NewestStamps, RawMessage


class Reads(Protocol):
    """Conversations and messages in one identity's libxmtp database."""

    async def conversations(self, expected: int = 0) -> list[ListedConversation]:
        """Every DM and group libxmtp holds (`expected`: about how many, which scales
        the listing's time bound)."""
        ...

    async def conversation(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None when libxmtp does not know it."""
        ...

    async def messages_since(
        self, conversation_id: str, inserted_after_ns: int
    ) -> list[RawMessage]:
        """A conversation's messages stamped after `inserted_after_ns`, each once."""
        ...

    def message_pages(
        self, conversation_id: str, inserted_after_ns: int
    ) -> AsyncIterator[list[RawMessage]]:
        """`messages_since` a bounded page at a time, each message once."""
        ...

    async def message_count(self, conversation_id: str) -> int:
        """How many messages libxmtp holds for a conversation."""
        ...

    async def newest_stamps(self) -> NewestStamps | None:
        """Each conversation's newest insert stamp, in one read (None: not read)."""
        ...

    async def own_messages(self, conversation_id: str, inserted_after_ns: int) -> list[RawMessage]:
        """This identity's application messages in a conversation."""
        ...

    def deleted_message_id(self, encoded_content: bytes) -> str | None:
        """The message id a deleteMessage content names, or None."""
        ...


class MemoryReads(MemoryXmtp):
    """An in-memory `Reads`: counts listings (`listings`), records whose messages were
    read (`reads`), pages by two messages (so a caller's paging is exercised), and
    fails the newest stamps' read while `stamps_readable` is False."""

    async def conversations(self, expected: int = 0) -> list[ListedConversation]:
        # As libxmtp's listing: each with its newest message by the sender's clock.
        self.listings += 1
        return [
            ListedConversation(
                c.info.id,
                max(c.messages, key=lambda m: m.sent_at_ns).id if c.messages else "",
            )
            for c in self.held.values()
        ]

    async def conversation(self, conversation_id: str) -> ConversationInfo | None:
        conv = self.held.get(conversation_id)
        if conv is None:
            return None
        consent = self.conversation_consent.get(conversation_id, conv.info.consent)
        return replace(conv.info, consent=consent)

    async def messages_since(
        self, conversation_id: str, inserted_after_ns: int
    ) -> list[RawMessage]:
        self.reads.append(conversation_id)
        conv = self.held.get(conversation_id)
        msgs = conv.messages if conv is not None else []
        return [m for m in msgs if m.inserted_at_ns > inserted_after_ns]

    async def message_pages(
        self, conversation_id: str, inserted_after_ns: int
    ) -> AsyncIterator[list[RawMessage]]:
        msgs = await self.messages_since(conversation_id, inserted_after_ns)
        for i in range(0, len(msgs), 2):
            yield msgs[i : i + 2]
        if not msgs:
            yield []

    async def message_count(self, conversation_id: str) -> int:
        return len(self.held[conversation_id].messages)

    async def newest_stamps(self) -> NewestStamps | None:
        self.stamp_reads += 1
        if not self.stamps_readable:
            return None
        return NewestStamps(
            time.time_ns(),
            {
                cid: max((m.inserted_at_ns for m in c.messages), default=0)
                for cid, c in self.held.items()
            },
        )

    async def own_messages(self, conversation_id: str, inserted_after_ns: int) -> list[RawMessage]:
        return [
            m
            for m in await self.messages_since(conversation_id, inserted_after_ns)
            if m.sender_inbox_id == self.inbox_id and m.application
        ]

    def deleted_message_id(self, encoded_content: bytes) -> str | None:
        return None


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[Reads] = MemoryReads


__all__ = ["MemoryReads", "Reads"]
