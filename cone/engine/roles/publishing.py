"""The publishing role: what the send path uses of the engine, and its fake.

A send is two steps in libxmtp: the message is stored unpublished with its id
(prepared, no network call), then published. libxmtp's publication call returns
only once it has read the conversation back and found the message there; the node
has it earlier, when the message stream echoes it, and `seen` says so then (on the
event loop), so that a send can answer at the first sign of publication.

`Engine` is the real `Publishing` (cone/engine/_sending.py); `MemoryPublishing` is an
in-memory one for the core's unit tests, type-checked with it. This module imports
nothing of libxmtp: the core may import it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cone.errors import Unavailable


def _nothing() -> None:
    pass


class Publishing(Protocol):
    """Prepare and publish messages into one identity's conversations."""

    async def prepare(self, conversation_id: str, payload: bytes) -> str:
        """Store an outgoing message unpublished; its id."""
        ...

    async def send(
        self,
        conversation_id: str,
        payload: bytes,
        prepared: Callable[[str], None],
        seen: Callable[[], None] = _nothing,
    ) -> str:
        """`prepare` then `publish` in one call; `prepared` learns the id (on another
        thread) before the publication starts; `seen` is called on the loop when the
        node has the message, mostly before this returns. Returns the id."""
        ...

    async def publish(
        self, conversation_id: str, message_id: str, seen: Callable[[], None] = _nothing
    ) -> None:
        """Publish a prepared message (harmless to repeat); `seen` as for `send`."""
        ...


class InTwoSteps:
    """`send` as the in-memory fakes make it: their own `prepare`, `prepared` told the
    id, their own `publish`."""

    async def prepare(self, conversation_id: str, payload: bytes) -> str:
        raise NotImplementedError

    async def publish(
        self, conversation_id: str, message_id: str, seen: Callable[[], None] = _nothing
    ) -> None:
        raise NotImplementedError

    async def send(
        self,
        conversation_id: str,
        payload: bytes,
        prepared: Callable[[str], None],
        seen: Callable[[], None] = _nothing,
    ) -> str:
        message_id = await self.prepare(conversation_id, payload)
        prepared(message_id)
        await self.publish(conversation_id, message_id, seen)
        return message_id


@dataclass
class MemoryPublishing(InTwoSteps):
    """An in-memory `Publishing`: messages prepared and published in dicts. `fail`
    publications fail (`Unavailable`) before the node has them; `hold` keeps each
    publication waiting after `seen` until it is set (the read-back still running),
    and `fail_after` that many fail then (the node has the message)."""

    prepared: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    published: list[str] = field(default_factory=list)
    fail: int = 0
    hold: asyncio.Event | None = None
    fail_after: int = 0
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    async def prepare(self, conversation_id: str, payload: bytes) -> str:
        message_id = f"{next(self._ids):064x}"
        self.prepared[message_id] = (conversation_id, payload)
        return message_id

    async def publish(
        self, conversation_id: str, message_id: str, seen: Callable[[], None] = _nothing
    ) -> None:
        if self.prepared[message_id][0] != conversation_id:
            raise ValueError(f"message {message_id} is not in {conversation_id}")
        if message_id in self.published:
            return
        if self.fail:
            self.fail -= 1
            raise Unavailable("the memory node refused the publication")
        self.published.append(message_id)
        seen()
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_after:
            self.fail_after -= 1
            raise Unavailable("the memory node's read-back failed")


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[Publishing] = MemoryPublishing


__all__ = ["InTwoSteps", "MemoryPublishing", "Publishing"]
