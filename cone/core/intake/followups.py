"""Follow-up syncs of new conversations, coalesced: one task, a bounded number at once.

libxmtp's message stream resubscribes to take in a new conversation, and a message
sent in that moment reaches its database only by a sync of the conversation. So each
new conversation is synced again a few times soon after it appears (`DELAYS_S`
after it, measured from when it appeared), instead of waiting for the next catch-up.

A burst of new conversations is one set of pending ids with their next due time,
drained by one task of `PARALLEL` workers: not three timed tasks per conversation (a
burst of 500 made 1,500 tasks, all syncing at once, and the reads ingest needed
queued behind them). Each worker takes the next due sync as soon as it is free, a
conversation's first sync ahead of any later one (in a burst everything is overdue,
and the first sync is what brings a first message the stream has not handed over),
so a slow sync holds one worker, not a batch. A conversation that appears again
while pending keeps its schedule. What is pending is the conversations that appeared
in the last `DELAYS_S[-1]` seconds, and in a burst those whose syncs are behind.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable

from cone.errors import ConeError

log = logging.getLogger("cone.core.followups")  # the lines people know by this name

#: When a new conversation is synced again, in seconds after it appeared.
DELAYS_S = (1.0, 3.0, 8.0)
#: Follow-up syncs in flight at most.
PARALLEL = 4


class FollowUps:
    """Syncs each new conversation at `delays` after it appears, by one worker task;
    `synced` is told each conversation after each of its syncs (failed or not)."""

    def __init__(
        self,
        sync: Callable[[str], Awaitable[None]],
        synced: Callable[[str], None],
        delays: tuple[float, ...] = DELAYS_S,
        parallel: int = PARALLEL,
    ) -> None:
        self._sync = sync
        self._synced = synced
        self._delays = delays
        self._parallel = parallel
        # (due, conversation id, step): the next sync of each pending conversation,
        # first syncs apart from later ones, which wait while any first one is due.
        self._first: list[tuple[float, str, int]] = []
        self._later: list[tuple[float, str, int]] = []
        self._pending: set[str] = set()
        self._wake = asyncio.Event()
        self._caught_up = asyncio.Event()  # set while the workers can take every one
        self._caught_up.set()
        self._task: asyncio.Task[None] | None = None

    def add(self, conversation_id: str) -> None:
        """Schedule a new conversation's syncs (no-op while it is pending)."""
        if conversation_id in self._pending:
            return
        self._pending.add(conversation_id)
        if len(self._pending) > self._parallel:
            self._caught_up.clear()
        appeared = time.monotonic()
        heapq.heappush(self._first, (appeared + self._delays[0], conversation_id, 0))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="follow-ups")
        self._wake.set()

    def pending(self) -> int:
        """How many conversations wait for a follow-up sync."""
        return len(self._pending)

    async def caught_up(self, limit_s: float) -> bool:
        """Wait until the follow-ups are not behind, at most `limit_s`: no more
        conversations wait for them than the workers sync at once (a burst has
        passed); whether they are."""
        try:
            async with asyncio.timeout(limit_s):
                await self._caught_up.wait()
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Stop the worker; what was pending is dropped (a start reads every conversation)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._first.clear()
        self._later.clear()
        self._pending.clear()
        self._caught_up.set()

    async def _run(self) -> None:
        await asyncio.gather(*(self._worker() for _ in range(self._parallel)))

    async def _worker(self) -> None:
        """Take the next due sync, a first one before any later one, while any
        conversation is pending; sleep until the next falls due or the schedule
        changes (a conversation added, a sync done)."""
        while self._pending:
            item = self._next_due()
            if item is None:
                self._wake.clear()
                dues = [queue[0][0] for queue in (self._first, self._later) if queue]
                wait = max(0.0, min(dues) - time.monotonic()) if dues else None
                try:
                    async with asyncio.timeout(wait):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                continue
            await self._one(*item)

    def _next_due(self) -> tuple[float, str, int] | None:
        now = time.monotonic()
        for queue in (self._first, self._later):
            if queue and queue[0][0] <= now:
                return heapq.heappop(queue)
        return None

    async def _one(self, due: float, cid: str, step: int) -> None:
        try:
            await self._sync(cid)
        except ConeError as exc:  # its next step, or the catch-up, syncs it again
            log.info("follow-up sync of %s failed: %s", cid, exc)
        self._synced(cid)
        if step + 1 < len(self._delays):
            # Measured from when it appeared: a late sync does not push the next back.
            appeared = due - self._delays[step]
            heapq.heappush(self._later, (appeared + self._delays[step + 1], cid, step + 1))
        else:
            self._pending.discard(cid)
            if len(self._pending) <= self._parallel:
                self._caught_up.set()
        self._wake.set()
