"""Group commit: writes that arrive while the store's thread is busy share one commit.

A synced commit (synchronous=FULL) costs an fsync, about a millisecond, and the store
has one thread: eight sends claiming their keys at once would wait for eight fsyncs
in a row. `GroupCommit` queues writes instead; the store's thread takes everything
queued when it gets to the group and runs it as one IMMEDIATE transaction, each
write in its own savepoint (one write's error rolls back only that write and is
raised to its own caller), with one synced commit for all. Each caller awaits its
own write's outcome, which it learns only once the whole group is committed. A lone write waits for nobody (the group
forms only while the thread is busy), so a sequential caller pays nothing for it.

Writes queued with `write_soon` (the outbox's settle record) are committed and
synced like any other, but nobody waits for them: they wait up to `SOON_S` for a
durable write to share its group (a sequential sender's next claim comes within a
few milliseconds, and takes the last settle along: one fsync per send, not two),
or for any other store call, so that later reads and writes see them: a read commits
them first (`flush`), a plain write in its own transaction (`take_soon`; the next
message's ingest after a reply, say: one fsync for both). A long poll's take, which
reads nothing they change, leaves them queued (`Store.write_apart`).

The failpoint `group_commit` (cone._failpoints) stops the store's thread right after
a group of at least `CONE_FAILPOINT_GROUP` durable writes (default 2) is committed,
before any caller learns it; while it is armed, durable writes wait in the queue
(at most `GATHER_S`, the store's thread serving other work meanwhile) until that
many are queued, so a test can force concurrent writes into one commit and kill the
process there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from cone import _failpoints
from cone.store._db import Connection, DatabaseError

log = logging.getLogger(__name__)

#: The failpoint's name, and how long an armed group waits to gather its writes.
FAILPOINT: Final = "group_commit"
GATHER_S: Final = 30.0
#: How long a write nobody waits for waits to share a group (seconds).
SOON_S: Final = 0.01


@dataclass
class _Write:
    fn: Callable[[Connection], Any]
    durable: bool
    future: asyncio.Future[Any] | None = None
    loop: asyncio.AbstractEventLoop | None = None


def hand_over(outcomes: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    """On the caller's loop: hand each waiting caller its result or error (a write's,
    or `Store.read`'s)."""
    for future, ok, value in outcomes:
        if future.done():  # the caller was cancelled: its write stands regardless
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class GroupCommit:
    """Queues writes for the store's one thread and commits them in groups."""

    def __init__(
        self,
        conn: Connection,
        pool: concurrent.futures.ThreadPoolExecutor,
        translate: Callable[[Exception], Exception],
    ) -> None:
        self._conn = conn
        self._pool = pool
        self._translate = translate
        self._lock = threading.Lock()
        self._gather_until: float | None = None
        self._queued: list[_Write] = []
        self._scheduled = False
        self._soon = False  # a flush of writes nobody waits for is due
        # Its timer, cancelled when a durable write takes those writes along first.
        self._soon_timer: asyncio.TimerHandle | None = None
        #: Groups committed, and the durable writes in them (for tests).
        self.groups = 0
        self.grouped = 0

    @property
    def waiting(self) -> int:
        """Writes queued for a group not yet handed to the store's thread (for tests)."""
        with self._lock:
            return 0 if self._scheduled else len(self._queued)

    async def write(self, fn: Callable[[Connection], Any]) -> Any:
        """Queue a durable write; its result once its group is committed and synced."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._add(_Write(fn, True, future, loop))
        return await future

    def write_soon(self, fn: Callable[[Connection], Any]) -> None:
        """Queue a write nobody waits for, committed (and synced) with the next group,
        within `SOON_S`."""
        with self._lock:
            self._queued.append(_Write(fn, False))
            if self._scheduled or self._soon:
                return
            self._soon = True
        try:
            self._soon_timer = asyncio.get_running_loop().call_later(SOON_S, self.flush)
        except RuntimeError:  # no loop here: commit it now
            self.flush()

    def take_soon(self) -> list[Callable[[Connection], Any]]:
        """On the store's thread: the queued writes nobody waits for, taken out of
        the queue (`Store.write` commits them in its own transaction)."""
        with self._lock:
            soon = [w.fn for w in self._queued if not w.durable]
            if soon:
                self._queued = [w for w in self._queued if w.durable]
        return soon

    def flush(self) -> None:
        """Have what is queued committed ahead of whatever the store runs next."""
        with self._lock:
            self._soon = False
            if self._scheduled or not self._queued:
                return
            self._scheduled = True
        self._pool.submit(self._run)

    def _add(self, write: _Write) -> None:
        with self._lock:
            self._queued.append(write)
            # Writes nobody waits for go with this write's group: their timer is not
            # left to wake an idle loop for nothing.
            timer, self._soon_timer = self._soon_timer, None
            self._soon = False
            schedule, self._scheduled = not self._scheduled, True
        if timer is not None and write.loop is asyncio.get_running_loop():
            timer.cancel()  # a loop's timers are cancelled only on that loop
        if schedule:
            self._pool.submit(self._run)

    def _take(self) -> list[_Write] | None:
        """Everything queued, or None while the armed failpoint still gathers (the
        store's thread goes on with other work; the next write, or the end of
        `GATHER_S`, brings the group back)."""
        gather = _failpoints.armed(FAILPOINT)
        with self._lock:
            self._scheduled = False
            if gather is not None and 0 < sum(w.durable for w in self._queued) < gather:
                if self._gather_until is None:
                    self._gather_until = time.monotonic() + GATHER_S
                    timer = threading.Timer(GATHER_S, self.flush)
                    timer.daemon = True
                    timer.start()
                if time.monotonic() < self._gather_until:
                    return None
            self._gather_until = None
            writes, self._queued = self._queued, []
        return writes

    def _run(self) -> None:
        """On the store's thread: commit everything queued now as one group."""
        writes = self._take()
        if not writes:  # gathering, or a write took them along (`take_soon`)
            return
        durable = sum(w.durable for w in writes)
        try:
            outcomes = self._commit(writes)
        except Exception as exc:  # the group's commit failed: every write with it
            error = self._translate(exc) if isinstance(exc, DatabaseError) else exc
            outcomes = [(False, error)] * len(writes)
        self.groups += 1
        self.grouped += durable
        if durable:
            gather = _failpoints.armed(FAILPOINT)
            if gather is not None and durable >= gather:
                _failpoints.reached_now(FAILPOINT)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
        for write, (ok, value) in zip(writes, outcomes, strict=True):
            if write.future is None or write.loop is None:
                if not ok:
                    log.error("a queued store write failed: %s", value)
                continue
            by_loop.setdefault(write.loop, []).append((write.future, ok, value))
        for loop, results in by_loop.items():
            try:
                loop.call_soon_threadsafe(hand_over, results)
            except RuntimeError:  # that loop is closed: nobody waits any more
                pass

    def _commit(self, writes: list[_Write]) -> list[tuple[bool, Any]]:
        conn = self._conn
        outcomes: list[tuple[bool, Any]] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            if len(writes) == 1:  # alone: its error rolls back the whole transaction
                outcomes.append((True, writes[0].fn(conn)))
                conn.execute("COMMIT")
                return outcomes
            for write in writes:
                conn.execute("SAVEPOINT grouped")
                try:
                    outcomes.append((True, write.fn(conn)))
                except Exception as exc:  # this write's error, raised to its caller
                    conn.execute("ROLLBACK TO grouped")
                    error = self._translate(exc) if isinstance(exc, DatabaseError) else exc
                    outcomes.append((False, error))
                conn.execute("RELEASE grouped")
            conn.execute("COMMIT")  # synchronous=FULL: synced when this returns
        finally:
            # A failed statement or COMMIT (a full disk) may leave the transaction
            # open, or SQLite may have rolled it back already.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        return outcomes
