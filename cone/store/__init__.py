"""cone's encrypted store: the only importer of sqlcipher3.

`Store` owns one SQLCipher connection and one worker thread. Query modules
(`inbox`, `conversations`, `meta`) hold plain functions over a connection; the core
runs them through `Store.read` and `Store.write`, so every mutating call is one
IMMEDIATE transaction that is committed and synced (synchronous=FULL) before the
awaiting coroutine resumes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from cone.errors import StateError, storage_full
from cone.store import attachments, conversations, held, history, inbox, meta, outbox
from cone.store._check import PageCheck
from cone.store._db import Connection, DatabaseError, corrupt, is_damage, open_database
from cone.store._group import GroupCommit, hand_over
from cone.store._migrations import migrate
from cone.store.keys import load_db_key
from cone.store.records import (
    AttachmentsKind,
    Consent,
    ContactRecord,
    Conversation,
    Kind,
    OwnMessage,
    Removed,
    Request,
    StoredAttachment,
    StoredMessage,
)

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class Store:
    """An open store. Create with `Store.open`; close with `close`."""

    def __init__(self, conn: Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        # One thread: SQLite work is serialized and never blocks the event loop.
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cone-store")
        # Writes that share commits on that thread (cone/store/_group.py).
        self.group = GroupCommit(conn, self._pool, self._translated)

    def _translated(self, exc: Exception) -> Exception:
        """A full disk becomes StateError(storage_full), a damaged page
        StateError(corrupt_database); other database errors stay as they are."""
        if storage_full(str(exc)):
            return StateError(
                f"cone's store cannot be written: the disk holding the state directory is "
                f"full ({exc}); free space there. Reads keep being answered meanwhile.",
                reason="storage_full",
            )
        if isinstance(exc, DatabaseError) and is_damage(exc):
            return corrupt(self.path, str(exc))
        return exc

    @classmethod
    def open(cls, path: Path, key: bytes) -> Store:
        """Open or create the store at `path` and bring its schema up to date. A store
        this call creates and cannot make (a full disk) is removed: no half-made store
        is left to pass for an identity."""
        new = not path.exists()
        conn = open_database(path, key)
        try:
            migrate(conn)
        except DatabaseError as exc:
            conn.close()
            if is_damage(exc):
                raise corrupt(path, str(exc)) from exc
            if storage_full(str(exc)):
                if new:
                    for made in (
                        path,
                        path.with_name(path.name + "-wal"),
                        path.with_name(path.name + "-shm"),
                    ):
                        made.unlink(missing_ok=True)
                raise StateError(
                    f"cone's store {path} cannot be made: the disk holding the state "
                    f"directory is full ({exc}); free space there and start again",
                    reason="storage_full",
                ) from exc
            raise
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

    def _write_sync(
        self,
        queued: bool,
        fn: Callable[Concatenate[Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                soon = self.group.take_soon() if queued else []
                if soon:
                    result = self._with_soon(soon, fn, *args, **kwargs)
                else:
                    result = fn(self._conn, *args, **kwargs)
                self._conn.execute("COMMIT")
            finally:
                # A failed statement or COMMIT (a full disk) may leave the transaction
                # open, or SQLite may have rolled it back already.
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
        except DatabaseError as exc:
            raise self._translated(exc) from exc
        return result

    def _with_soon(
        self,
        soon: list[Callable[[Connection], object]],
        fn: Callable[Concatenate[Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """In the open transaction: the queued `write_soon` records (each in a
        savepoint: one's error is logged, as in a group), then `fn` in a savepoint of
        its own, whose error rolls back only `fn` (the records still commit)."""
        conn = self._conn
        for write in soon:
            conn.execute("SAVEPOINT soon")
            try:
                write(conn)
            except Exception as exc:
                log.error("a queued store write failed: %s", exc)
                if not conn.in_transaction:  # its error ended the transaction (a full disk)
                    raise
                conn.execute("ROLLBACK TO soon")
            conn.execute("RELEASE soon")
        conn.execute("SAVEPOINT own")
        try:
            result = fn(conn, *args, **kwargs)
        except BaseException:
            if conn.in_transaction:  # else fn's error ended it, the records with it
                try:
                    conn.execute("ROLLBACK TO own")
                    conn.execute("RELEASE own")
                    conn.execute("COMMIT")
                except DatabaseError as exc:  # fn's error is the one its caller learns
                    log.error("queued store writes failed: %s", exc)
            raise
        conn.execute("RELEASE own")
        return result

    def _rolled_back_sync(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        try:
            self._conn.execute("BEGIN")
            try:
                return fn(self._conn, *args, **kwargs)
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
        except DatabaseError as exc:
            raise self._translated(exc) from exc

    def _read_sync(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        try:
            return fn(self._conn, *args, **kwargs)
        except DatabaseError as exc:
            raise self._translated(exc) from exc

    async def write(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run `fn(conn, ...)` in one write transaction; durable when this returns.
        Records queued with `write_soon` are committed in that transaction, ahead of
        `fn` (so `fn` sees them, and one commit syncs both)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, lambda: self._write_sync(True, fn, *args, **kwargs)
        )

    async def write_apart(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`write` for a transaction that reads nothing `write_soon` queues (the
        outbox's settle records): it leaves them queued to share a later commit, so
        that a write with nothing to write (a long poll finding nothing pending) syncs
        nothing."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, lambda: self._write_sync(False, fn, *args, **kwargs)
        )

    async def read(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run `fn(conn, ...)` for reading. Its outcome comes straight back to this
        loop (as group commit's do): no concurrent future chained to an asyncio one, as
        `run_in_executor` would, which cost 10-30 µs more a read (docs/bench.md,
        history). A read whose caller was cancelled still runs; it changes nothing."""
        self.group.flush()  # a write queued before is seen
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pool.submit(
            self._read_for, loop, future, lambda: self._read_sync(fn, *args, **kwargs)
        )
        return await future

    @staticmethod
    def _read_for(
        loop: asyncio.AbstractEventLoop, future: asyncio.Future[T], read: Callable[[], T]
    ) -> None:
        """On the store's thread: run `read`, hand its outcome to `future` on `loop`."""
        try:
            outcome: tuple[bool, Any] = (True, read())
        except BaseException as exc:  # the caller's to see, as an executor would hand it over
            outcome = (False, exc)
        try:
            loop.call_soon_threadsafe(hand_over, [(future, *outcome)])
        except RuntimeError:  # that loop is closed: nobody waits any more
            pass

    async def rolled_back(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run `fn(conn, ...)` in a transaction that is rolled back: its result without
        its writes (for answering a read when the disk is too full to record it)."""
        self.group.flush()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, lambda: self._rolled_back_sync(fn, *args, **kwargs)
        )

    async def write_grouped(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`write`, sharing its commit (and fsync) with the writes queued beside it
        while the store is busy (group commit, cone/store/_group.py); durable when
        this returns. `fn`'s error rolls back only its own write."""
        result: T = await self.group.write(lambda conn: fn(conn, *args, **kwargs))
        return result

    def write_soon(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> None:
        """Queue a write without waiting for it; later reads and writes see it (they
        commit it first, a write in its own transaction; `write_apart` excepted). It
        joins the next group commit or write (synced as any), within milliseconds.
        Only for records whose loss in a crash before that commit is already healed."""
        self.group.write_soon(lambda conn: fn(conn, *args, **kwargs))

    def write_now(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """The synchronous `write`, for start-up code that runs before the loop serves."""
        return self._pool.submit(lambda: self._write_sync(True, fn, *args, **kwargs)).result()

    def read_now(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """The synchronous `read`, for start-up code."""
        self.group.flush()
        return self._pool.submit(lambda: self._read_sync(fn, *args, **kwargs)).result()

    def close(self) -> None:
        """Finish pending work and close the connection."""
        self.group.flush()
        self._pool.shutdown(wait=True)
        self._conn.close()


__all__ = [
    "AttachmentsKind",
    "Connection",
    "Consent",
    "ContactRecord",
    "Conversation",
    "Kind",
    "OwnMessage",
    "PageCheck",
    "Removed",
    "Request",
    "Store",
    "StoredAttachment",
    "StoredMessage",
    "attachments",
    "conversations",
    "held",
    "history",
    "inbox",
    "load_db_key",
    "meta",
    "outbox",
]
