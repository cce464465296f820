"""Receives waiting for news, served inside the commit that brings the news.

A `receive` that finds nothing pending registers a `Waiter` and waits on it. When
ingest commits streamed messages it takes each waiter's pending batch in that same
write transaction (`take_for`, on the store's thread) and hands it out once the
transaction is committed and synced (`hand_out`, on the loop). So a message is still
durable before any consumer sees it, and a waiting receive gets it without a second
write transaction (and its fsync) and two more hops to the store's thread.

A waiter found nothing pending up to the inbox's head at its look (`after_seq`), and
whatever could make an older message pending since (a conversation accepted, news
read from libxmtp's database) wakes it to look again: so its batch is taken from the
messages after that head alone, a range of the primary key, not a scan of the inbox.

Any other news (a consent change, a message read from libxmtp's database) wakes the
waiters without a batch (`wake`): each takes its batch itself, as before.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from cone.store import Connection, StoredMessage, inbox

#: A receive's answer: the messages, and whether more are pending.
Batch = tuple[list[StoredMessage], bool]


@dataclass(eq=False)
class Waiter:
    """One waiting receive: what it asks for (read on the store's thread), and where
    its batch goes (None: look again yourself)."""

    consumer: str
    limit: int
    exclude: tuple[str, ...]
    #: The inbox's head when the waiter last found nothing pending.
    after_seq: int
    batch: asyncio.Future[Batch | None]


class Waiters:
    """The receives waiting now."""

    def __init__(self) -> None:
        self._waiting: set[Waiter] = set()

    @contextmanager
    def wait(
        self, consumer: str, limit: int, exclude: Sequence[str], after_seq: int
    ) -> Iterator[Waiter]:
        """Register a waiter (that found nothing pending up to `after_seq`) for the
        block's duration."""
        future: asyncio.Future[Batch | None] = asyncio.get_running_loop().create_future()
        waiter = Waiter(consumer, limit, tuple(exclude), after_seq, future)
        self._waiting.add(waiter)
        try:
            yield waiter
        finally:
            self._waiting.discard(waiter)
            future.cancel()

    def waiting(self) -> list[Waiter]:
        """The waiters not answered yet (for the next commit to serve)."""
        return [w for w in self._waiting if not w.batch.done()]

    def wake(self) -> None:
        """News without a batch: every waiter looks again."""
        for waiter in self._waiting:
            if not waiter.batch.done():
                waiter.batch.set_result(None)


def take_for(conn: Connection, waiters: Sequence[Waiter]) -> list[tuple[Waiter, Batch]]:
    """Inside a write transaction: each waiter's pending batch, its deliveries recorded
    (`inbox.take_pending`), for the waiters that have one."""
    now = time.time_ns()
    out = []
    for waiter in waiters:
        messages, more = inbox.take_pending(
            conn, waiter.consumer, waiter.limit, waiter.exclude, now, after_seq=waiter.after_seq
        )
        if messages:
            out.append((waiter, (messages, more)))
    return out


def take_or_head(
    conn: Connection, consumer: str, limit: int, exclude: Sequence[str], now_ns: int
) -> tuple[list[StoredMessage], bool, int]:
    """`inbox.take_pending`, and when nothing is pending, the inbox's head (0 otherwise):
    where a waiter's look ended."""
    messages, more = inbox.take_pending(conn, consumer, limit, exclude, now_ns)
    return messages, more, 0 if messages else inbox.head(conn)


def hand_out(served: Sequence[tuple[Waiter, Batch]]) -> None:
    """After the commit: answer the waiters served (one that gave up meanwhile leaves
    its messages pending, as a cancelled receive does)."""
    for waiter, batch in served:
        if not waiter.batch.done():
            waiter.batch.set_result(batch)


__all__ = ["Batch", "Waiter", "Waiters", "hand_out", "take_for", "take_or_head"]
