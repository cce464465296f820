"""libxmtp's publications of a conversation, one round at a time, shared by its sends.

libxmtp publishes a conversation's queued messages in one call (`publish_messages`)
that holds the conversation's lock through the publication and the read-back that
ends it, and every call runs at least one such cycle, whether or not an earlier call
already published its message. Eight sends outstanding at once in one conversation,
each with its own call, ran about eight cycles, most publishing nothing, at more CPU
a message than sending one at a time. So a conversation has at most one call running
and one waiting: a send whose message is queued while a round runs waits for the next
round, which starts when the running one ends and publishes everything queued by
then, for all who wait on it.

Used on the loop that makes the calls (the engine's lane); rounds are kept per loop,
so a call made on a worker of its own while the lane is stuck never mixes with them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Key = tuple[asyncio.AbstractEventLoop, bytes]


class Rounds:
    """Publication rounds per conversation: one running, at most one waiting."""

    def __init__(self) -> None:
        self._running: dict[Key, asyncio.Future[None]] = {}
        self._waiting: dict[Key, asyncio.Future[None]] = {}

    async def publish(self, conversation: bytes, call: Callable[[], Awaitable[None]]) -> None:
        """Return once a round of `call()` (libxmtp's `publish_messages` for
        `conversation`) that began after this was called has ended; its error is
        raised to everyone who waited on it. A caller's cancellation leaves the
        round to the others."""
        loop = asyncio.get_running_loop()
        key = (loop, conversation)
        if key not in self._running:
            round_ = self._start(key, call)
        else:
            round_ = self._waiting.get(key) or self._waiting.setdefault(key, loop.create_future())
        await asyncio.shield(round_)

    def _start(self, key: Key, call: Callable[[], Awaitable[None]]) -> asyncio.Future[None]:
        loop = key[0]
        ended: asyncio.Future[None] = loop.create_future()
        ended.add_done_callback(_retrieved)  # its waiters may all have been cancelled
        self._running[key] = ended
        task = asyncio.ensure_future(call())

        def done(task: asyncio.Future[None]) -> None:
            del self._running[key]
            _settle(ended, task)
            waiting = self._waiting.pop(key, None)
            if waiting is not None:
                waiting.add_done_callback(_retrieved)
                self._start(key, call).add_done_callback(lambda r: _settle(waiting, r))

        task.add_done_callback(done)
        return ended


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def _settle(future: asyncio.Future[None], outcome: asyncio.Future[None]) -> None:
    """Give `future` the outcome of `outcome`, which is done."""
    if future.done():
        return
    if outcome.cancelled():
        future.cancel()
    elif (exc := outcome.exception()) is not None:
        future.set_exception(exc)
    else:
        future.set_result(None)


__all__ = ["Rounds"]
