"""Reads of libxmtp's local database: the conversation listing and messages.

Part of the engine: every call goes through its `Calls` (off the loop, bounded,
translated). Nothing here goes to the network.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from cone import _malloc
from cone.engine import _convert
from cone.engine._calls import LOCAL_CALL_S, Calls
from cone.engine.values import ConversationInfo, ListedConversation, RawMessage

PAGE: Final = 500
# What each conversation adds to the listing's time bound: the listing took 9.4 s
# for 10,000 conversations at load 10 on 2 cores (docs/bench.md, "big store"), about
# 1 ms each; three times that.
LIST_S_PER_CONVERSATION: Final = 0.003


class Reads:
    """Conversations and messages in one identity's libxmtp database.

    `client` gives libxmtp's current client at each call (it changes at the cutover),
    so the last listing's size, which scales the next one's bound, carries over."""

    def __init__(self, client: Callable[[], Any], calls: Calls, inbox_id: str) -> None:
        self._client = client
        self._x = calls
        self._inbox_id = inbox_id
        self._listed = 0  # conversations in the last listing (scales its bound)

    async def conversations(self, expected: int = 0) -> list[ListedConversation]:
        """Every DM and group in libxmtp's database (the device-sync group excluded),
        each with the id of the newest message the listing shows.

        One libxmtp query whose time grows with the store: its bound is
        `LOCAL_CALL_S` plus `LIST_S_PER_CONVERSATION` for each conversation expected
        (the caller's count, or the last listing's, whichever is larger)."""

        def listed() -> list[ListedConversation]:
            items = self._client().conversations().list(_convert.every_conversation())
            found = [_convert.listed(item) for item in items]
            del items  # libxmtp's objects, freed before the trim
            # The listing allocates tens of MiB at 10,000 conversations: give the
            # freed part back now (cone/_malloc.py).
            _malloc.trim()
            return found

        self._listed = max(self._listed, expected)
        bound = LOCAL_CALL_S + LIST_S_PER_CONVERSATION * self._listed
        found = await self._x.call_sync(listed, bound, "listing conversations")
        self._listed = len(found)
        return found

    async def conversation(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None when libxmtp does not know it."""

        def found() -> ConversationInfo | None:
            conv = _convert.find(self._client(), conversation_id)
            return _convert.info(conv) if conv is not None else None

        return await self._x.call_sync(found, LOCAL_CALL_S, "reading a conversation")

    def _find_page(self, key: bytes, opts: Any) -> Awaitable[list[Any]]:
        page: Awaitable[list[Any]] = self._client().conversation(key).find_messages(opts)
        return page

    async def messages_since(
        self, conversation_id: str, inserted_after_ns: int
    ) -> list[RawMessage]:
        """Messages libxmtp stored for a conversation with `inserted_at_ns` above the
        given value, each once, in libxmtp's insertion-stamp order: `message_pages`
        joined."""
        out: list[RawMessage] = []
        async for page in self.message_pages(conversation_id, inserted_after_ns):
            out.extend(page)
        return out

    async def message_pages(
        self, conversation_id: str, inserted_after_ns: int
    ) -> AsyncIterator[list[RawMessage]]:
        """A conversation's messages past `inserted_after_ns`, a page at a time (about
        `PAGE` messages), each once: what a whole history is read with, never all of
        it in memory at once.

        libxmtp 1.10's stamps are neither unique nor close to the clock (see
        docs/guarantees.md), so pages overlap by one stamp and are joined by id: a run
        of equal stamps across a page boundary is never cut. Only the ids at a page's
        last stamp are remembered across pages.
        """
        key = bytes.fromhex(conversation_id)
        cursor, limit = inserted_after_ns, PAGE
        boundary: set[bytes] = set()
        while True:
            opts = _convert.messages_after(limit=limit, inserted_after_ns=cursor)
            page = await self._x.call(
                functools.partial(self._find_page, key, opts), LOCAL_CALL_S, "reading messages"
            )
            if len(page) < limit:
                yield [
                    _convert.raw(m, conversation_id) for m in page if bytes(m.id) not in boundary
                ]
                return
            top = page[-1].inserted_at_ns - 1
            if top <= cursor:
                limit *= 2  # a whole page of one stamp: widen the page, never skip
                continue
            yield [_convert.raw(m, conversation_id) for m in page if bytes(m.id) not in boundary]
            boundary = {bytes(m.id) for m in page if m.inserted_at_ns > top}
            cursor, limit = top, PAGE

    async def message_count(self, conversation_id: str) -> int:
        """How many messages libxmtp holds for a conversation (every kind and sender):
        as many as `message_pages` returns from the start."""
        key = bytes.fromhex(conversation_id)
        opts = _convert.messages_after(limit=None, inserted_after_ns=None)

        def counted() -> int:
            conv = self._client().conversation(key)
            n = int(conv.count_messages(opts))
            if _convert.is_dm(conv):
                # libxmtp 1.10's count leaves a DM's group updates out unless asked
                # for by type, while its listing returns them.
                n += int(conv.count_messages(_convert.group_updates()))
            return n

        return await self._x.call_sync(counted, LOCAL_CALL_S, "counting messages")

    async def own_messages(self, conversation_id: str, inserted_after_ns: int) -> list[RawMessage]:
        """This identity's messages in a conversation (to find a prepared one by key)."""
        return [
            m
            for m in await self.messages_since(conversation_id, inserted_after_ns)
            if m.sender_inbox_id == self._inbox_id and m.application
        ]


__all__ = ["LIST_S_PER_CONVERSATION", "PAGE", "Reads"]
