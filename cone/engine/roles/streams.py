"""The streams role: messages, conversations and consent as they come, and its fake.

`Engine` is the real `Streams` (cone/engine/_subscriptions.py, each stream under a
supervisor); `MemoryStreams` keeps the handlers, and `deliver` hands a stored message
to the message handler as the stream would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from cone.engine.roles.memory import MemoryXmtp
from cone.engine.values import ConsentUpdate, RawMessage, StreamHealth

#: The streams status names (the message stream is three subscriptions).
STREAMS = ("messages", "requests", "accepted", "conversations", "consent")


class Streams(Protocol):
    """The message, conversation and consent streams."""

    async def start_streams(
        self,
        *,
        on_message: Callable[[RawMessage], None],
        on_conversation: Callable[[str], None],
        on_consent: Callable[[list[ConsentUpdate]], None],
        on_restart: Callable[[], None],
    ) -> None:
        """Open the message, conversation and consent streams."""
        ...

    def reconnect_streams(self) -> None:
        """Reopen now every stream waiting out its backoff."""
        ...

    def stream_health(self) -> list[StreamHealth]:
        """Health of each stream."""
        ...


class MemoryStreams(MemoryXmtp):
    """In-memory `Streams`: always connected; `handlers` holds what was subscribed."""

    async def start_streams(
        self,
        *,
        on_message: Callable[[RawMessage], None],
        on_conversation: Callable[[str], None],
        on_consent: Callable[[list[ConsentUpdate]], None],
        on_restart: Callable[[], None],
    ) -> None:
        self.handlers = {
            "message": on_message,
            "conversation": on_conversation,
            "consent": on_consent,
            "restart": on_restart,
        }

    def reconnect_streams(self) -> None:
        pass

    def stream_health(self) -> list[StreamHealth]:
        return [StreamHealth(name, connected=True) for name in STREAMS]

    def deliver(self, message: RawMessage) -> None:
        """Hand a stored message to the message stream's handler (started first)."""
        self.handlers["message"](message)


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[Streams] = MemoryStreams


__all__ = ["STREAMS", "MemoryStreams", "Streams"]
