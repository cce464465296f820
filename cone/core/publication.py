"""A claimed key's message published, and the send answered at the first sign of it.

libxmtp's publication call returns only once it has read the conversation back and
found the message there; the node has the message earlier, when the message stream
echoes it (`Publishing`'s `seen`), about a third of a send sooner. So a publication
answers at the first of the two: the echo, or the call's own return (the streams may
be down), and the key settles then (the outbox's settle record: published). What is
left of libxmtp's call runs on in the background; the conversation's next send starts
meanwhile (the message is on the node already, so the order holds).

Should libxmtp's call fail after the echo, the key is recorded failing with its
message id and the outbox publishes the same stored message again (libxmtp does
nothing for one it has published; a second copy on the node has the same id, which
clients keep once). A crash after the answer and before the settle record is committed
is the crash the outbox heals already: the key is pending, its prepared message found
by the key it carries and published again.

The failpoints `send_prepared` (the message prepared, its publication not started)
and `send_answered` (answered at the echo, the settle record queued but perhaps not
committed, libxmtp's call still running) are where the crash tests kill the daemon.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cone import _failpoints
from cone.engine.roles.publishing import Publishing
from cone.errors import ConeError
from cone.store.outbox import OutboxRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answered:
    """A publication the node has: its message id, and whether libxmtp's call is over
    or still finishing in the background."""

    message_id: str
    finished: bool


#: Wraps libxmtp's publication call (the outbox's: it gives up once the node forgets
#: this identity).
Guard = Callable[[Awaitable[str]], Awaitable[str]]


class Publications:
    """The publications of the outbox, those still finishing among them."""

    def __init__(
        self,
        publishing: Publishing,
        *,
        failed: Callable[[OutboxRecord, str, ConeError], Awaitable[None]],
    ) -> None:
        self._publishing = publishing
        # Told when libxmtp's call fails after the answer: record the key failing.
        self._failed = failed
        self._tasks: set[asyncio.Task[None]] = set()
        #: Publications answered at the echo, and at libxmtp's return (for the log).
        self.at_echo = 0
        self.at_return = 0

    async def publish(
        self,
        rec: OutboxRecord,
        message_id: str | None,
        prepared: list[str],
        guard: Guard,
        *,
        queued: Callable[[], None] | None = None,
    ) -> Answered:
        """Publish `rec`'s message (prepared first when `message_id` is None, its id
        appended to `prepared` as soon as libxmtp has stored it, and `queued` then
        called on this loop); return once the node has it. A failure before that
        raises as libxmtp's call does."""
        loop = asyncio.get_running_loop()
        seen: asyncio.Future[None] = loop.create_future()

        def on_seen() -> None:
            if not seen.done():
                seen.set_result(None)

        def on_prepared(new_id: str) -> None:  # on libxmtp's worker thread
            prepared.append(new_id)
            _failpoints.reached_now("send_prepared")
            if queued is not None:
                try:
                    loop.call_soon_threadsafe(queued)
                except RuntimeError:  # the loop is closed: nobody waits any more
                    pass

        if message_id is None:
            call = guard(
                self._publishing.send(rec.conversation_id, rec.payload, on_prepared, on_seen)
            )
        else:
            known = message_id
            prepared.append(known)
            await _failpoints.reached("send_prepared")

            async def republish() -> str:
                await self._publishing.publish(rec.conversation_id, known, on_seen)
                return known

            call = guard(republish())
        publishing = asyncio.ensure_future(call)
        first: set[asyncio.Future[Any]] = {seen, publishing}
        try:
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            publishing.cancel()
            raise
        if publishing.done():
            self.at_return += 1
            return Answered(publishing.result(), True)
        self.at_echo += 1
        answered = prepared[0]
        task = asyncio.create_task(self._finish(rec, answered, publishing), name="publication")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Answered(answered, False)

    async def _finish(
        self, rec: OutboxRecord, message_id: str, publishing: asyncio.Future[str]
    ) -> None:
        """libxmtp's call, after the answer: a failure is recorded on the key."""
        try:
            await _failpoints.reached("send_answered")
            await publishing
        except asyncio.CancelledError:
            publishing.cancel()  # stopping: libxmtp's call is let go with it
            await asyncio.gather(publishing, return_exceptions=True)
            raise
        except ConeError as err:
            log.warning("send %r was published; libxmtp's call failed after: %s", rec.key, err)
            await self._failed(rec, message_id, err)
        except Exception:  # a worker's boundary: the key keeps its settle record
            log.exception("send %r: libxmtp's call failed after the answer", rec.key)

    async def stop(self) -> None:
        """Stop waiting for libxmtp's calls answered already (their keys are settled)."""
        log.info(
            "publications answered at the echo: %d, at libxmtp's return: %d",
            self.at_echo,
            self.at_return,
        )
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


__all__ = ["Answered", "Guard", "Publications"]
