"""The three streams cone keeps open: messages, conversations and consent.

Each is a `SupervisedStream` (cone/engine/streams.py) whose opener subscribes
through the engine's offloaded calls and waits until libxmtp says it is ready.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from cone.engine import _convert
from cone.engine._calls import NETWORK_CALL_S, Calls
from cone.engine._echoes import Echoes
from cone.engine.port import ConsentUpdate, RawMessage
from cone.engine.streams import Opener, StreamHandle, SupervisedStream

#: How long ending a stream waits for libxmtp's task to stop (it is aborted: prompt).
ENDING_S: Final = 5.0


def supervised_streams(
    client: Callable[[], Any],
    x: Calls,
    *,
    on_message: Callable[[RawMessage], None],
    on_conversation: Callable[[str], None],
    on_consent: Callable[[list[ConsentUpdate]], None],
    on_restart: Callable[[], None],
    on_error: Callable[[str], None],
    echoes: Echoes,
) -> list[SupervisedStream]:
    """The message, conversation and consent streams, not yet started; `client`
    gives libxmtp's current client at each (re)subscription (it changes at the
    cutover), `on_error` hears each stream's ending error. A message in `echoes`
    (this engine's own send) is dropped on libxmtp's thread, never converted."""

    def message(m: Any) -> RawMessage | None:
        if echoes.take(m.sender_inbox_id, m.id):
            return None
        return _convert.raw(m, bytes(m.conversation_id).hex())

    def conversation(c: Any) -> str:
        return bytes(c.id()).hex()

    def opener(name: str, open_: Callable[[Any, Any], Awaitable[Any]]) -> Opener:
        async def ready(cb: Any) -> Any:
            closer = await open_(client().conversations(), cb)
            try:
                await closer.wait_for_ready()
            except BaseException:
                # Given up on (out of time, or stopping): a subscription nobody holds
                # would live on, and call back after its loop has closed.
                closer.end()
                raise
            if closer.is_closed():
                # libxmtp reports "ready" also for a subscription that failed.
                raise ConnectionError(
                    "the subscription failed: the node refused it or cannot be reached"
                )
            return closer

        async def opened(cb: Any) -> StreamHandle:
            closer: Any = await x.call(lambda: ready(cb), NETWORK_CALL_S, f"opening {name}")
            # Waits for libxmtp's task to end: none of its callbacks can come later.
            return StreamHandle(lambda: x.call(closer.end_and_wait, ENDING_S, f"ending {name}"))

        return opened

    def supervised(
        name: str,
        label: str,
        open_: Callable[[Any, Any], Awaitable[Any]],
        convert: Callable[[Any], Any],
        on_item: Callable[[Any], None],
    ) -> SupervisedStream:
        return SupervisedStream(
            name, opener(f"the {label} stream", open_), convert, on_item, on_restart, on_error
        )

    return [
        supervised(
            "messages",
            "message",
            lambda c, cb: c.stream_all_messages(cb, None),
            message,
            on_message,
        ),
        supervised(
            "conversations",
            "conversation",
            lambda c, cb: c.stream(cb),
            conversation,
            on_conversation,
        ),
        supervised(
            "consent",
            "consent",
            lambda c, cb: c.stream_consent(cb),
            _convert.consent_updates,
            on_consent,
        ),
    ]


__all__ = ["supervised_streams"]
