"""Receive, Peek and Ack: handing out the inbox, and waiting for news.

A waiting call sleeps until a commit brings news (`wake`); a streamed commit may
answer it in the same transaction (cone/core/intake/waiters.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from cone.core import validate
from cone.core.intake.waiters import Waiters, take_or_head
from cone.core.model import Message
from cone.errors import StateError, Unavailable
from cone.store import Store, StoredMessage, inbox

log = logging.getLogger(__name__)


class Receiving:
    """The inbox's consumers' side: receive, peek, ack."""

    def __init__(
        self,
        store: Store,
        unreachable: Callable[[], str | None],
        waiters: Waiters | None = None,
    ) -> None:
        self._store = store
        # Why the network cannot be reached now (None: it can): an empty answer is
        # then an error instead.
        self._unreachable = unreachable
        self._arrival = asyncio.Event()
        #: Receives waiting for news; a streamed commit serves them (the intake's).
        self.waiters = waiters or Waiters()

    def wake(self) -> None:
        """Wake every waiting Receive and Peek; each re-reads the store."""
        self._arrival.set()
        self._arrival = asyncio.Event()
        self.waiters.wake()

    async def receive(
        self, consumer: str, limit: int | None, wait_ms: int, exclude: list[str]
    ) -> tuple[list[Message], bool]:
        """Pending messages, oldest first, waiting up to `wait_ms` for the first."""
        consumer = validate.consumer(consumer)
        limit = validate.receive_limit(limit)
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            arrival = self._arrival
            messages, more, head = await self._take_pending(consumer, limit, exclude)
            if messages:
                return messages, more
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            with self.waiters.wait(consumer, limit, exclude, head) as waiter:
                if arrival.is_set():
                    continue  # news came while the store was read: look again
                try:
                    async with asyncio.timeout(remaining):
                        batch = await waiter.batch
                except TimeoutError:
                    break
            if batch is not None:  # taken in the commit that brought the news
                messages, more = batch
                return messages, more
        unreachable = self._unreachable()
        if unreachable is not None:
            # Never a silent empty while the network cannot be reached.
            raise Unavailable(
                f"nothing is pending and the network cannot be reached: {unreachable}",
                reason="sync_failed",
            )
        return [], False

    async def _take_pending(
        self, consumer: str, limit: int, exclude: list[str]
    ) -> tuple[list[StoredMessage], bool, int]:
        """The pending batch, or when there is none, the inbox's head (see waiters)."""
        try:
            # Apart from the outbox's queued settle records: they wait for the next
            # message's commit instead of a sync of their own here.
            return await self._store.write_apart(
                take_or_head, consumer, limit, exclude, time.time_ns()
            )
        except StateError as exc:
            if exc.reason != "storage_full":
                raise
            # A full disk: answer from the store anyway, without recording this
            # delivery (the messages stay pending, as always until acked).
            log.warning("receive answered without recording deliveries: %s", exc.message)
            return await self._store.rolled_back(
                take_or_head, consumer, limit, exclude, time.time_ns()
            )

    async def peek(
        self, consumer: str, after_seq: int, limit: int | None, wait_ms: int
    ) -> tuple[list[Message], bool, int]:
        """Messages after `after_seq` without touching receipts (all accepted ones, or
        those `consumer` has not acknowledged), waiting up to `wait_ms` for the first."""
        limit = validate.receive_limit(limit)
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            arrival = self._arrival
            messages, more, head = await self._store.read(inbox.peek, consumer, after_seq, limit)
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0:
                return messages, more, head
            try:
                async with asyncio.timeout(remaining):
                    await arrival.wait()
            except TimeoutError:
                return [], False, head

    async def ack(self, consumer: str, message_ids: list[str]) -> int:
        """Acknowledge ids for a consumer (idempotent, all or nothing)."""
        consumer = validate.consumer(consumer)
        return await self._store.write(inbox.ack, consumer, message_ids, time.time_ns())


__all__ = ["Receiving"]
