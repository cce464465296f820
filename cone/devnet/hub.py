"""Live fan-out from stored rows to open subscriptions, by topic.

A subscription is registered before its stream reads history, so a row stored in
between is both in the history and in the live buffer; the stream drops the copy
by its high-water mark. Rows are published in the order they were stored, which
is id order per topic.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Iterable
from typing import Any, Final, Generic, Protocol, TypeVar

#: Rows buffered for one subscriber before it is cut off as too slow.
MAX_BUFFERED: Final = 100_000
#: A subscription to more topics than this is not indexed by topic: each row is
#: checked against its topic set instead. A client's stream over all its
#: conversations names every one and is opened again for each new conversation, so
#: at 10,000 conversations indexing each opening cost more than all its rows.
WIDE: Final = 64


class Row(Protocol):
    """What the hub needs of a row: its id and the topic it belongs to."""

    @property
    def id(self) -> int: ...

    @property
    def topic(self) -> bytes: ...


R = TypeVar("R", bound=Row)


class EndReason(enum.Enum):
    """Why the node ended a subscription."""

    DROPPED = "dropped by fault injection"
    SHUTDOWN = "the devnet is shutting down"
    TOO_SLOW = "caller did not read all messages fast enough"
    V3_CUTOVER = (
        "XMTP V3 streaming is no longer available. Please upgrade your client to XMTP D14N."
    )


class StreamEnded(Exception):
    """Raised by `Subscription.next` once the node has ended the subscription."""

    def __init__(self, reason: EndReason) -> None:
        super().__init__(reason.value)
        self.reason = reason


class Subscription(Generic[R]):
    """One open stream's live buffer."""

    def __init__(self, topics: frozenset[bytes], *, d14n: bool = False) -> None:
        self.topics = topics
        #: Whether a D14N client opened it (the V3 cutover does not end it).
        self.d14n = d14n
        self._rows: deque[R] = deque()
        self._wake = asyncio.Event()
        self._ended: EndReason | None = None

    def push(self, row: R) -> None:
        """Buffer a live row (from the hub)."""
        if self._ended is not None:
            return
        if len(self._rows) >= MAX_BUFFERED:
            self.end(EndReason.TOO_SLOW)
            return
        self._rows.append(row)
        self._wake.set()

    def end(self, reason: EndReason) -> None:
        """End the subscription: `next` raises StreamEnded from now on."""
        if self._ended is None:
            self._ended = reason
            self._rows.clear()
            self._wake.set()

    def check(self) -> None:
        """Raise StreamEnded if the subscription has been ended."""
        if self._ended is not None:
            raise StreamEnded(self._ended)

    async def next(self) -> R:
        """The next live row, waiting for one; StreamEnded once ended."""
        while True:
            self.check()
            if self._rows:
                return self._rows.popleft()
            self._wake.clear()
            await self._wake.wait()


class Hub(Generic[R]):
    """The open subscriptions of one kind of row (group messages or welcomes)."""

    def __init__(self) -> None:
        self._by_topic: dict[bytes, set[Subscription[R]]] = {}
        self._wide: set[Subscription[R]] = set()  # more than WIDE topics: not indexed
        self._all: set[Subscription[R]] = set()

    def __len__(self) -> int:
        return len(self._all)

    def subscribe(self, topics: Iterable[bytes], *, d14n: bool = False) -> Subscription[R]:
        """Register a subscription for live rows of the topics (`d14n`: for the
        D14N API)."""
        sub: Subscription[R] = Subscription(frozenset(topics), d14n=d14n)
        self._add(sub, sub.topics)
        return sub

    def attach(self, sub: Subscription[Any], topics: Iterable[bytes]) -> None:
        """Also hand this hub's live rows of `topics` to an existing subscription (a
        D14N stream over group and welcome topics at once)."""
        added = frozenset(topics)
        sub.topics = sub.topics | added
        if sub in self._wide:
            return  # matched by its topic set, which now holds them
        if sub in self._all:
            self._index(sub, added)  # indexed here already: stays indexed
            return
        self._add(sub, added)

    def unsubscribe(self, sub: Subscription[R]) -> None:
        """Forget a subscription (its stream has ended)."""
        self._remove(sub)

    def _add(self, sub: Subscription[R], topics: frozenset[bytes]) -> None:
        self._all.add(sub)
        if len(topics) > WIDE:
            self._wide.add(sub)
        else:
            self._index(sub, topics)

    def _index(self, sub: Subscription[R], topics: frozenset[bytes]) -> None:
        for topic in topics:
            subs = self._by_topic.get(topic)
            if subs is None:
                self._by_topic[topic] = {sub}
            else:
                subs.add(sub)

    def _remove(self, sub: Subscription[R]) -> None:
        if sub not in self._all:
            return
        self._all.discard(sub)
        if sub in self._wide:
            self._wide.discard(sub)
            return
        for topic in sub.topics:
            subs = self._by_topic.get(topic)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del self._by_topic[topic]

    def publish(self, rows: Iterable[R]) -> None:
        """Hand newly stored rows, in id order, to their topics' subscribers."""
        for row in rows:
            for sub in self._by_topic.get(row.topic, ()):
                sub.push(row)
            for sub in self._wide:
                if row.topic in sub.topics:
                    sub.push(row)

    def end_all(self, reason: EndReason) -> int:
        """End every open subscription (for the V3 cutover, every V3 one); returns
        how many were ended."""
        subs = [s for s in self._all if not (reason is EndReason.V3_CUTOVER and s.d14n)]
        for sub in subs:
            sub.end(reason)
        return len(subs)
