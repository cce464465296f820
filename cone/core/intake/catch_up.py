"""The catch-up: libxmtp's sync of every conversation, read into the inbox, at the
start and then periodically, as a net under the streams (docs/guarantees.md, path 2).

Each period syncs, reads the conversations whose newest message changed (or keeps
the last listing when the sync brought nothing in, cone/core/intake/relisting.py), and runs
the window check (path 3) unless the start's full reconciliation is still running.
The wait between periods is the interval, stretched after a long pass
(cone/core/intake/pacing.py); a period that falls due while the follow-up syncs of new
conversations are behind (a burst) waits for them, at most one interval more; `now`
starts a period at once. The listing of conversations (`list`) is shared with the
start's read and ingest: one at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from cone import _failpoints
from cone.core.intake import pacing
from cone.core.intake.ingest import Ingestor
from cone.core.intake.relisting import Relisting
from cone.engine.port import ListedConversation
from cone.engine.roles.reads import Reads
from cone.engine.roles.sync import Sync
from cone.errors import Unavailable

log = logging.getLogger("cone.core.service")  # the lines people know by this name


class CatchUpRoles(Reads, Sync, Protocol):
    """What the catch-up uses of the engine: the listing and the full sync."""


class CatchUp:
    """The sync of every conversation, and the periodic catch-up built on it."""

    def __init__(
        self,
        engine: CatchUpRoles,
        ingestor: Ingestor,
        interval_s: float,
        *,
        reconciling: Callable[[], bool],
        on_back: Callable[[], None],
        caught_up: Callable[[float], Awaitable[bool]],
    ) -> None:
        self._engine = engine
        self._ingestor = ingestor
        self._interval_s = interval_s
        self._reconciling = reconciling  # the full pass covers the window check
        self._on_back = on_back  # a sync succeeded after one failed
        # Waits (at most the seconds given) until the follow-up syncs of new
        # conversations are not behind: a period that falls due in a burst waits.
        self._caught_up = caught_up
        self._now = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # libxmtp's last conversation listing and when it was asked for (`list`);
        # one listing at a time.
        self._listing: tuple[float, list[ListedConversation]] | None = None
        self._listing_lock = asyncio.Lock()
        # Whether a period lists again or keeps that listing, and the conversations
        # cone published in since its last listing (a send syncs its group, which
        # may store a peer's news).
        self._relisting = Relisting()
        self._published: set[str] = set()
        self.last_sync_ns: int | None = None
        self.last_sync_error: str | None = None

    def start(self) -> None:
        """Catch up every period from now on."""
        self._task = asyncio.create_task(self._run(), name="catch-up")

    async def stop(self) -> None:
        """Stop catching up."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def now(self) -> None:
        """Start a period now rather than when the wait runs out."""
        self._now.set()

    def relist(self) -> None:
        """Have the next period take a fresh listing (a stream restart, the cutover)."""
        self._relisting.expire()

    def published_in(self, conversation_id: str) -> None:
        """Cone published in this conversation: a period that keeps its listing
        reads it."""
        self._published.add(conversation_id)

    async def _run(self) -> None:
        wait = self._interval_s
        while True:
            try:
                async with asyncio.timeout(wait):
                    await self._now.wait()
            except TimeoutError:
                await self._after_burst()
            self._now.clear()
            started = time.monotonic()
            try:
                listing: list[ListedConversation] | None = None
                current = True
                try:
                    listing, current = await self.sync(keep_listing=True)
                except Unavailable as exc:
                    log.warning("catch-up failed: %s", exc)
                if not self._reconciling():
                    if listing is None:  # the failed sync's listing, or a fresh one
                        listing = await self.list(max_age_s=self._interval_s)
                    # A kept listing (`current` false) records no conversation.
                    await self._ingestor.reconciler.reconcile(
                        full=False, listing=listing, current=current
                    )
            except Exception:  # the loop's boundary: a failed pass must not end catch-up
                log.exception("catch-up failed unexpectedly; trying again next period")
            took = time.monotonic() - started
            stretched = wait > self._interval_s
            wait = pacing.next_wait(self._interval_s, took)
            if wait > self._interval_s:
                log.debug("catch-up took %.1f s; the next in %.0f s", took, wait)
                if not stretched:  # said once, without -v: why the syncs are further apart
                    log.info(
                        "a catch-up took %.1f s: catching up every %.0f s or so instead of "
                        "every %.0f s while they stay this long",
                        took,
                        wait,
                        self._interval_s,
                    )
            elif stretched:
                log.info("catch-ups are short again: catching up every %.0f s", wait)

    async def _after_burst(self) -> None:
        """Hold a period that fell due while the follow-up syncs of new conversations
        are behind, until they have caught up, at most one interval more, or until
        `now` asks for a period. In a burst of new conversations into a big store,
        libxmtp's sync of every conversation held its streams and the follow-up syncs
        back for 18 s and more at 10,000 conversations (docs/bench.md, "New
        conversations arriving in a big store"); a new conversation now and then
        holds nothing."""
        held = time.monotonic()
        caught_up = asyncio.ensure_future(self._caught_up(self._interval_s))
        asked = asyncio.ensure_future(self._now.wait())
        try:
            await asyncio.wait((caught_up, asked), return_when=asyncio.FIRST_COMPLETED)
        finally:
            caught_up.cancel()
            asked.cancel()
        if (took := time.monotonic() - held) >= 0.1:
            log.debug("a catch-up waited %.1f s for new conversations' follow-up syncs", took)

    async def sync(self, *, keep_listing: bool = False) -> tuple[list[ListedConversation], bool]:
        """A full sync and ingest; Unavailable(reason=sync_failed) on failure.
        Returns the listing it read by and whether it is a fresh one.

        With `keep_listing` (the catch-up's periods) a sync that brought nothing in
        keeps the held listing and reads only the conversations cone published in
        since it was taken (cone/core/intake/relisting.py, docs/guarantees.md)."""
        started = time.monotonic()
        try:
            summary = await self._engine.sync_all()
        except Unavailable as exc:
            self.last_sync_error = exc.message
            self._relisting.expire()
            # What the streams stored locally still enters the inbox.
            await self._ingestor.ingest_all(await self.list())
            raise
        await _failpoints.reached("sync_read")
        held = self._listing
        current = not keep_listing or held is None or self._relisting.needed(summary)
        if current:
            # Expired until this listing is read: a failure lists again next period.
            self._relisting.expire()
            self._published.clear()  # the listing shows each as changed
            listing = await self.list()
            # Only conversations whose newest listed message changed since cone read
            # them; the catch-up's window check and the full pass cover the rest.
            await self._ingestor.ingest_all(listing, changed_only=True)
            self._relisting.listed(summary)
        else:
            assert held is not None
            listing = held[1]
            self._relisting.kept()
            # A send syncs its group: a peer's message it stored is the stream's to
            # hand over, and read here too.
            published = set(self._published)
            if published:
                await self._ingestor.ingest(published)
                self._published -= published
        if self.last_sync_error is not None:
            log.info("the network is reachable again")
        log.debug(
            "synced in %.0f ms (%s)",
            (time.monotonic() - started) * 1000,
            f"libxmtp synced {summary.synced} of {summary.eligible} conversations"
            if summary is not None
            else "no summary",
        )
        self.last_sync_ns = time.time_ns()
        if self.last_sync_error is not None:
            self.last_sync_error = None
            self._on_back()
        return listing, current

    async def list(self, expected: int = 0, max_age_s: float = 0.0) -> list[ListedConversation]:
        """libxmtp's conversation listing: the last one when it was asked for at most
        `max_age_s` before this call, else a new one; one at a time. The catch-up's
        sync lists once a period and its window check takes that listing.

        libxmtp 1.10's view found each conversation's newest message by reading every
        stored message: at 10,000 conversations and 100,000 messages a listing cost
        seconds, tens of MiB of libxmtp's memory while it ran, and up to 120 MiB of its
        database mapped into the daemon by the connection that ran it. cone's text of
        the view finds it by index (cone/engine/_listing_view.py); converting 10,000
        conversations still takes 0.7 s. Two at once
        (the catch-up's and the settings refresh's, or ingest's after a stream restart)
        cost that twice. A caller that waited for the one running reuses it when it was
        asked for after this call, which is as fresh as a listing of its own."""
        asked = time.monotonic()
        async with self._listing_lock:
            if self._listing is not None and self._listing[0] >= asked - max_age_s:
                return self._listing[1]
            started = time.monotonic()
            listing = await self._engine.conversations(expected)
            self._listing = (started, listing)
            log.debug(
                "conversation listing: %d in %.2f s", len(listing), time.monotonic() - started
            )
            return listing
