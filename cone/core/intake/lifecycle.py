"""The intake's one owner: builds the pipeline's parts, starts, feeds and stops them.

The start reads what libxmtp stored since cone last read, subscribes to the streams,
syncs missed mail, then keeps catching up periodically; the full reconciliation runs
after it. The streams' callbacks come here; what else a new conversation or a
restarted stream means to the core (destinations resolved afresh, settings read) is
the host's, given as hooks at construction.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from cone import _failpoints
from cone.core.intake.arrivals import decided
from cone.core.intake.catch_up import CatchUp
from cone.core.intake.committing import AfterCommit
from cone.core.intake.followups import FollowUps
from cone.core.intake.ingest import Ingestor
from cone.core.intake.waiters import Waiters
from cone.engine.port import (
    ConsentUpdate,
    ConversationInfo,
    EnginePort,
    ListedConversation,
    RawMessage,
)
from cone.errors import ConeError, unknown_conversation
from cone.limits import REQUEST_BUDGET, RequestBudget
from cone.store import Store, conversations

log = logging.getLogger("cone.core.service")  # the lines people know by this name

# The start's full reconciliation reads by a listing at most this old (seconds): the
# first sync's, taken just before it.
RECONCILE_LISTING_AGE_S = 60.0


class Intake:
    """libxmtp's messages, conversations and consent into the store: the start's
    read, the streams, the catch-up, the follow-ups and the reconciliation."""

    def __init__(
        self,
        store: Store,
        engine: EnginePort,
        *,
        waiters: Waiters,
        on_new: Callable[[], None],
        after_commit: AfterCommit,
        on_back: Callable[[], None],
        on_conversation: Callable[[str], None],
        on_restart: Callable[[], None],
        after_first_sync: Callable[[], Awaitable[None]],
        on_started: Callable[[], None],
        interval_s: float = 30.0,
        budget: RequestBudget = REQUEST_BUDGET,
    ) -> None:
        self._store = store
        self._engine = engine
        # Wakes whatever waits for news (receives, the attachments' fetcher).
        self._on_new = on_new
        self._on_conversation = on_conversation
        self._on_restart = on_restart
        self._after_first_sync = after_first_sync
        self._on_started = on_started
        #: From libxmtp's database into the inbox, exactly once (ingest.py); its
        #: listings are the catch-up's, one at a time.
        self.ingestor = Ingestor(
            store,
            engine,
            on_new,
            waiters,
            budget,
            lister=self._list,
            after_commit=after_commit,
        )
        #: The sync of every conversation, at start and every period (catch_up.py).
        self.catch_up = CatchUp(
            engine,
            self.ingestor,
            interval_s,
            reconciling=self.reconciling,
            on_back=on_back,
            caught_up=self._caught_up,
        )
        # New conversations synced again soon (followups.py).
        self._follow_ups = FollowUps(self._sync_conversation, self.ingestor.mark)
        self._background: set[asyncio.Task[None]] = set()
        self._reconciling: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._began = time.monotonic()
        self._started = False

    async def _list(self) -> list[ListedConversation]:
        return await self.catch_up.list()

    async def _sync_conversation(self, conversation_id: str) -> None:
        await self._engine.sync_conversation(conversation_id)

    async def _caught_up(self, limit_s: float) -> bool:
        return await self._follow_ups.caught_up(limit_s)

    # --- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Start the ingest worker, then read, subscribe and sync in the background
        (`_start_reading`): answers from the store are served meanwhile, stale."""
        self._began = time.monotonic()
        await self.ingestor.start()

    def begin_reading(self) -> None:
        """The start's read, subscription and first sync, in the background."""
        self._starting = asyncio.create_task(self._start_reading(), name="start")

    async def _start_reading(self) -> None:
        """Read what libxmtp stored since cone last read, subscribe, sync missed mail,
        then keep catching up periodically; the full reconciliation runs after it.

        Reading first keeps what libxmtp stored before a crash ahead of what arrives
        after it, in inbox order; it reads each conversation from where its last
        complete read started, and only those libxmtp stored something for since
        (their newest stamps, read once after the listing), so its cost follows what
        is new, not the history or the number of conversations."""
        began = self._began
        await _failpoints.reached("start_read")
        start_read = (0, 0)
        try:
            expected = len(await self._store.read(conversations.all_conversations))
            asked = time.monotonic()
            listing = await self.catch_up.list(expected)
            log.info("listed %d conversations in %.2f s", len(listing), time.monotonic() - asked)
            newest = await self._engine.newest_stamps() if listing else None
            await self.ingestor.ingest_all(listing, newest=newest)
            start_read = self.ingestor.last_read
        except ConeError as exc:  # the first sync reads every conversation again
            log.warning("the start's read failed (%s); the first sync reads again", exc.message)
        read = time.monotonic()
        await _failpoints.reached("start_streams")
        await self._engine.start_streams(
            on_message=self._on_message,
            on_conversation=self._on_new_conversation,
            on_consent=self._on_consent,
            on_restart=self._on_stream_restart,
        )
        streams = time.monotonic()
        try:
            await self.sync()
        except ConeError as exc:  # the catch-up tries again each period
            log.warning("first sync failed (%s); catching up in the background", exc.message)
        else:
            await self._after_first_sync()
        self._started = True
        log.info(
            "core started in %.1f s: read %.1f s, streams %.1f s, first sync %.1f s "
            "(it read %d of %d conversations, the start's read %d of %d)",
            time.monotonic() - began,
            read - began,
            streams - read,
            time.monotonic() - streams,
            *self.ingestor.last_read,
            *start_read,
        )
        self.catch_up.start()
        self._on_started()
        self._reconciling = asyncio.create_task(self._reconcile_all(), name="reconcile")
        self._background.add(self._reconciling)
        self._reconciling.add_done_callback(self._background.discard)

    async def started(self) -> None:
        """Wait until the start's read and first sync are done."""
        if self._starting is not None:
            await asyncio.gather(asyncio.shield(self._starting), return_exceptions=True)

    def starting(self) -> bool:
        """Whether the start's read and first sync are still running (answers come
        from the store meanwhile, marked stale)."""
        return not self._started

    async def stop(self) -> None:
        """Stop the start's read, the catch-up, the reconciliation, the follow-ups,
        the streams' consent work and the ingest worker; the store stays open."""
        if self._starting is not None:
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        await self.catch_up.stop()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._follow_ups.stop()
        await self.ingestor.stop()

    async def _reconcile_all(self) -> None:
        try:
            # The first sync's listing, taken a moment ago (one listing of 10,000
            # conversations is about a second of libxmtp's): a conversation made since
            # is read by ingest as usual, and whole by the next start's pass.
            listing = await self.catch_up.list(max_age_s=RECONCILE_LISTING_AGE_S)
            await self.ingestor.reconciler.reconcile_all(listing)
        except Exception:  # its boundary: the next start tries again
            log.exception("the full reconciliation failed; the next start runs it again")

    def reconciling(self) -> bool:
        """Whether the start's full reconciliation is still running."""
        return self._reconciling is not None and not self._reconciling.done()

    # --- the catch-up's state --------------------------------------------------------

    async def sync(self) -> None:
        """A full sync and ingest; Unavailable(reason=sync_failed) on failure."""
        await self.catch_up.sync()

    @property
    def last_sync_ns(self) -> int | None:
        """When the last sync succeeded (ns since the epoch)."""
        return self.catch_up.last_sync_ns

    @property
    def last_sync_error(self) -> str | None:
        """Why the last sync failed, while it has not succeeded since."""
        return self.catch_up.last_sync_error

    def network_ok(self) -> bool:
        """Whether the network is known reachable: the last sync did not fail."""
        return self.last_sync_error is None

    # --- what the operations ask of it -------------------------------------------------

    async def recorded(self, conversation_id: str) -> ConversationInfo:
        """A conversation libxmtp knows, recorded in the store if it was not yet;
        NotFound (unknown_conversation) if libxmtp does not know it."""
        info = await self._engine.conversation(conversation_id)
        if info is None:
            raise unknown_conversation(conversation_id)
        await self.ingestor.record(info)
        return info

    def follow(self, conversation_id: str) -> None:
        """A conversation this identity just made or accepted: read it soon, and sync
        it a few times soon after, as a new conversation.

        libxmtp's message stream resubscribes to include a new conversation, and a
        message sent in that gap reaches the local database only by a sync; waiting
        for the periodic catch-up would delay it by up to a whole period. A burst's
        follow-ups are one set drained by one task (followups.py)."""
        self.ingestor.mark(conversation_id)
        self._follow_ups.add(conversation_id)

    def read_all_now(self) -> None:
        """Read every conversation again and catch up now (the backend moved)."""
        self.ingestor.mark_all()
        self.catch_up.relist()
        self.catch_up.now()

    # --- the streams -------------------------------------------------------------------

    def _on_stream_restart(self) -> None:
        # Whatever the gap skipped is read back from libxmtp's database; a stream that
        # reopens while the network was down means it is back: catch up now.
        self._on_restart()
        self.ingestor.mark_all()
        self.catch_up.relist()
        if not self.network_ok():
            self.catch_up.now()

    def _on_message(self, raw: RawMessage) -> None:
        # The stream's echo of a message this cone sent never comes here: the engine
        # drops it on libxmtp's thread, and the outbox tells retention of the send.
        self.ingestor.accept(raw)

    def _on_new_conversation(self, conversation_id: str) -> None:
        self._on_conversation(conversation_id)
        self.follow(conversation_id)

    def _on_consent(self, updates: list[ConsentUpdate]) -> None:
        self._in_background(self._apply_consent(updates))

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as a task the intake's stop cancels."""
        task = asyncio.get_running_loop().create_task(work)
        # The loop keeps only weak references to tasks: hold it until it is done.
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _apply_consent(self, updates: list[ConsentUpdate]) -> None:
        now = time.time_ns()
        for u in updates:
            wanted = decided(u.consent)
            # An own record's echo is no news, and a late one would undo a decision
            # taken since (an "allowed" arriving after a block re-accepted it).
            if wanted is None or u.conversation_id is None or u.own:
                continue
            # Not recorded yet: its recording reads XMTP's record again (`Ingestor.record`).
            conv = await self._store.read(conversations.get, u.conversation_id)
            if conv is not None and conv.consent is not wanted:
                await self._store.write(conversations.set_consent, conv.id, wanted, now)
        self._on_new()


__all__ = ["RECONCILE_LISTING_AGE_S", "Intake"]
