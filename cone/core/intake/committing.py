"""Committing libxmtp's messages into the inbox, by message id (cone/core/intake/ingest.py).

A message enters once: the ids cone has read (delivered, or skipped as own,
protocol-only or a repeated send key) are checked in the write that inserts. A batch
the store refuses is committed one message at a time, and a message it refuses even
alone enters as its metadata (unreadable), so one message never holds back another.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Set

from cone import metrics
from cone.core.intake.arrivals import bare, to_inbox
from cone.core.intake.waiters import Batch, Waiter, Waiters, hand_out, take_for
from cone.engine.port import RawMessage
from cone.limits import REQUEST_BUDGET, RequestBudget
from cone.store import Connection, Store, StoredMessage, conversations, details, held, inbox

# The ingest's logger: `-v` shows each arrival as `cone.core.ingest` (docs/cli.md).
log = logging.getLogger("cone.core.ingest")

#: Told after each commit of a conversation's messages, with the messages read and,
#: of them, those cone had not read before.
AfterCommit = Callable[[str, list[RawMessage], list[RawMessage]], Awaitable[None]]

# How long before a read's start the next read begins: covers a libxmtp insert whose
# stamp was taken before the read started but committed after it.
READ_MARGIN_NS = 10_000_000_000


class Committer:
    """Commits one identity's messages from libxmtp into cone's inbox."""

    def __init__(
        self,
        store: Store,
        inbox_id: str,
        waiters: Waiters,
        budget: RequestBudget = REQUEST_BUDGET,
        after_commit: AfterCommit | None = None,
    ) -> None:
        self._store = store
        self._inbox_id = inbox_id
        # What requests may hold; the rest is dropped at the commit (cone/store/held.py).
        self._budget = budget
        # Receives waiting now: a streamed commit takes their batches (cone/core/intake/waiters.py).
        self._waiters = waiters
        # Called after each commit with the messages read for a conversation (deletions
        # and disappearing settings, cone/core/retention.py); None: nothing to call.
        self.after_commit = after_commit

    async def commit(
        self,
        cid: str,
        raws: list[RawMessage],
        floor_ns: int | None = None,
        *,
        known: Set[str] = frozenset(),
    ) -> list[str]:
        """Commit the messages cone has not read yet, and with `floor_ns` move the
        conversation's read point there; returns the ids that entered the inbox.
        `known`: ids the caller read from the store as read already, which are not
        looked up again (the rest are, in the store)."""
        unread = [r for r in raws if r.id not in known]
        if unread:
            found = await self._store.read(inbox.known_ids, [r.id for r in unread])
            unread = [r for r in unread if r.id not in found]
        new = await self._commit_unread(cid, unread, floor_ns)
        if self.after_commit is not None and raws:
            await self.after_commit(cid, raws, unread)
        return new

    async def commit_streamed(self, cid: str, held: list[RawMessage]) -> int | None:
        """Streamed messages of a conversation cone records already: checked and
        committed in one write transaction, with no libxmtp call, the waiting receives'
        batches taken in it; returns how many entered. None when cone does not record
        the conversation yet, or the batch would not store as a whole: the caller's
        full path takes it then."""
        rows, skipped = self._rows(held)
        updates = {raw.id for raw in held if not raw.application}
        waiting = self._waiters.waiting()
        try:
            done = await self._store.write(
                _commit_if_recorded, cid, rows, skipped, updates, waiting, self._budget
            )
        except Exception as exc:  # the full path stores it row by row, or retries
            log.debug("streamed commit of %s failed (%s); taking the full path", cid, exc)
            return None
        if done is None:
            return None
        committed, served = done
        # Committed and synced: the waiting receives may have their batches now.
        hand_out(served)
        _log_arrivals(rows, committed)
        _count_arrivals(rows, committed)
        if self.after_commit is not None:
            # Read before only in a race with another read path: taken as unread.
            await self.after_commit(cid, held, held)
        return len(committed)

    def _rows(self, raws: list[RawMessage]) -> tuple[list[StoredMessage], list[str]]:
        """`raws` in the conversation's order, as its members see it: the inbox's rows,
        and the ids of those it delivers to no one (its own, protocol messages)."""
        rows: list[StoredMessage] = []
        skipped: list[str] = []
        for raw in sorted(raws, key=_conversation_order):
            row = to_inbox(raw, self._inbox_id)
            if row is None:
                skipped.append(raw.id)
            else:
                rows.append(row)
        return rows, skipped

    async def _commit_unread(
        self, cid: str, unread: list[RawMessage], floor_ns: int | None
    ) -> list[str]:
        rows, skipped = self._rows(unread)
        if not rows and not skipped and floor_ns is None:
            return []
        # A group update taken in: the listing reads the group's details again.
        updated = any(not raw.application for raw in unread)
        try:
            committed = await self._store.write(
                _commit_rows, cid, rows, skipped, floor_ns, updated=updated, budget=self._budget
            )
        except Exception as exc:
            if not rows:
                raise
            log.warning(
                "committing %d message(s) of %s failed (%s); one by one", len(rows), cid, exc
            )
        else:
            _log_arrivals(rows, committed)
            _count_arrivals(rows, committed)
            return committed
        new: list[str] = []
        stored: list[StoredMessage] = []
        for row in rows:
            try:
                new += await self._store.write(
                    _commit_rows, cid, [row], [], None, budget=self._budget
                )
                stored.append(row)
            except Exception as exc:
                # A row the store refuses still enters, as its metadata; if even that
                # fails, the store itself is failing: the whole conversation retries.
                kept = bare(row, f"could not be stored: {exc}")
                new += await self._store.write(
                    _commit_rows, cid, [kept], [], None, budget=self._budget
                )
                stored.append(kept)
        await self._store.write(_commit_rows, cid, [], skipped, floor_ns, updated=updated)
        _count_arrivals(stored, new)
        return new


def _log_arrivals(rows: list[StoredMessage], new: list[str]) -> None:
    """`-v`: one line per message that entered the inbox (ids, never content)."""
    if new and log.isEnabledFor(logging.DEBUG):
        fresh = set(new)
        for row in rows:
            if row.id in fresh:
                log.debug(
                    "message in %s in %s from %s (%s)",
                    row.id,
                    row.conversation_id,
                    row.sender_inbox_id,
                    row.content_type,
                )


def _count_arrivals(rows: list[StoredMessage], new: list[str]) -> None:
    """`/metrics`: messages that entered the inbox, and how many of them are unreadable."""
    fresh = set(new)
    metrics.INGESTED.inc(len(fresh))
    metrics.UNREADABLE.inc(sum(1 for row in rows if row.id in fresh and row.unreadable))


def _conversation_order(raw: RawMessage) -> tuple[int, str]:
    return raw.sent_at_ns, raw.id


def _commit_if_recorded(
    conn: Connection,
    conversation_id: str,
    rows: list[StoredMessage],
    skipped: list[str],
    updates: Set[str],
    waiting: list[Waiter],
    budget: RequestBudget,
) -> tuple[list[str], list[tuple[Waiter, Batch]]] | None:
    """`_commit_rows` for the messages not read yet, if the conversation is recorded
    (None, writing nothing, when it is not); when any entered the inbox, the waiting
    receives' batches are taken in the same transaction."""
    if conversations.get(conn, conversation_id) is None:
        return None
    known = inbox.known_ids(conn, [r.id for r in rows] + skipped)
    fresh = [r for r in rows if r.id not in known]
    fresh_skipped = [s for s in skipped if s not in known]
    updated = any(s in updates for s in fresh_skipped)
    new = _commit_rows(
        conn, conversation_id, fresh, fresh_skipped, None, updated=updated, budget=budget
    )
    return new, take_for(conn, waiting) if new else []


def _commit_rows(
    conn: Connection,
    conversation_id: str,
    rows: list[StoredMessage],
    skipped: list[str],
    floor_ns: int | None,
    *,
    updated: bool = False,
    budget: RequestBudget | None = None,
) -> list[str]:
    if budget is not None and rows:
        conv = conversations.get(conn, conversation_id)
        if conv is not None:
            # A request holds at most its budget; the rest is dropped and counted.
            rows, dropped = held.admit(conn, conv, rows, budget)
            if dropped:
                log.debug(
                    "dropped %d message(s) of request %s from %s: over the request budget",
                    len(dropped),
                    conversation_id,
                    conv.peer_inbox_id,
                )
    new = inbox.insert_messages(conn, rows)
    inbox.skip(conn, conversation_id, skipped)
    if updated:  # in the transaction that takes the update in (cone/store/details.py)
        details.changed(conn, [conversation_id])
    if floor_ns is not None:
        conversations.set_ingested(conn, conversation_id, max(0, floor_ns))
    return new


__all__ = ["READ_MARGIN_NS", "AfterCommit", "Committer"]
