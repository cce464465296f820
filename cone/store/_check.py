"""The store's page-by-page check, beside the store's own work.

`PRAGMA quick_check` reads every page of `cone.db` (each one decrypted and
authenticated by SQLCipher) and walks every b-tree: seconds per few hundred MB
(docs/bench.md, big store). Run before anything else, it held every start back for
as long as the store is big. It runs instead on a connection and a thread of its
own (a WAL reader: the store's writes go on), while the host opens libxmtp and
answers; what it finds is handed to the host, which stops as a start refused for
damage would (cone/daemon/runtime.py).
Until it is done, a read that meets a damaged page fails its authentication and the
store names it as damage (`corrupt_database`): no call gets a damaged page's content.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from pathlib import Path

from cone.errors import StateError
from cone.store._db import Connection, DatabaseError, corrupt, is_damage, keyed_connection

log = logging.getLogger(__name__)

#: How long `stop` waits for the check's thread once it has interrupted it (SQLite
#: looks at the interruption between pages: it ends at once).
STOP_WAIT_S = 5.0
#: SQLite's steps between two looks at `stop` during the check.
PROGRESS_STEPS = 10_000
#: At most this many of quick_check's findings go into the error.
FINDINGS_SHOWN = 3


class PageCheck:
    """One page-by-page check of the store at `path`, run once, on its own thread."""

    def __init__(self, path: Path, key: bytes) -> None:
        self._path = path
        self._key = key
        self._outcome: concurrent.futures.Future[StateError | None] = concurrent.futures.Future()
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._stopped = False
        self._thread: threading.Thread | None = None

    @property
    def damage(self) -> StateError | None:
        """What the check found damaged, once it is done and found something."""
        if not self._outcome.done() or self._outcome.cancelled():
            return None
        return self._outcome.result()

    async def run(self) -> StateError | None:
        """Start the check and wait for it: the damage it found, or None when the store
        is intact, the check could not run (a warning says why), or it was stopped."""
        with self._lock:
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(
                    target=self._check, name="cone-store-check", daemon=True
                )
                self._thread.start()
        # A stopped check has its outcome already (`stop` settles it).
        return await asyncio.wrap_future(self._outcome)

    def stop(self) -> None:
        """Interrupt a check under way and wait (bounded) for its thread; a check
        not started yet never starts."""
        with self._lock:
            self._stopped = True
            conn, thread = self._conn, self._thread
            if conn is not None:
                conn.interrupt()
        if thread is not None:
            thread.join(STOP_WAIT_S)
        self._settle(None)

    def _settle(self, outcome: StateError | None) -> None:
        with self._lock:
            if not self._outcome.done():
                self._outcome.set_result(outcome)

    def _check(self) -> None:
        started = time.monotonic()
        outcome: StateError | None = None
        try:
            outcome = self._checked()
        except Exception as exc:  # said, and the host goes on: nothing was found damaged
            log.warning("cone's store could not be checked page by page: %s", exc)
        else:
            if outcome is None and not self._stopped:
                took = time.monotonic() - started
                log.info("cone's store checked page by page in %.1f s: intact", took)
        finally:
            self._settle(outcome)

    def _checked(self) -> StateError | None:
        try:
            conn = keyed_connection(self._path, self._key)
        except StateError as err:
            if err.reason == "corrupt_database":
                return err
            raise
        try:
            # `interrupt` is lost when it comes before the statement runs: the
            # handler ends the check at its next steps once `stop` has been called.
            conn.set_progress_handler(lambda: self._stopped, PROGRESS_STEPS)
            with self._lock:
                if self._stopped:
                    return None
                self._conn = conn
            try:
                findings = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
            except DatabaseError as exc:
                if is_damage(exc):
                    return corrupt(self._path, str(exc))
                if self._stopped:
                    log.info("cone's store check was stopped before it finished")
                    return None
                raise
            if findings != ["ok"]:
                return corrupt(self._path, "; ".join(findings[:FINDINGS_SHOWN]))
            return None
        finally:
            with self._lock:
                self._conn = None
            conn.close()


__all__ = ["PageCheck"]
