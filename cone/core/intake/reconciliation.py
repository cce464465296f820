"""Reconciliation: libxmtp's messages compared with what cone has read, gaps healed.

Part of ingest (cone/core/intake/ingest.py): after start, in the background, each
conversation's messages a page at a time (`reconcile_all`: from where the last start's
pass found cone complete, or every message, cone/store/reconciled.py; not at all when
libxmtp stored nothing in it since, by its newest stamp), and at each
catch-up a recent window plus a timestamp-free count check (`reconcile`). A message
the stream and the reads should have taken and did not is ingested then, counted as
healed, and logged as a warning: a healed gap is a bug, never silent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Set

from cone import _failpoints
from cone.core.intake import at_once
from cone.core.intake.committing import READ_MARGIN_NS, Committer
from cone.core.intake.window_turns import WindowTurns
from cone.engine.port import ListedConversation, NewestStamps
from cone.engine.roles.reads import Reads
from cone.store import Conversation, Store, conversations, inbox, meta, reconciled
from cone.store.reconciled import Mark

# The ingest's logger: operators know these warnings as `cone.core.ingest`'s.
log = logging.getLogger("cone.core.ingest")

# The least a catch-up reconciliation looks back (libxmtp's stamps run up to 60 s ahead).
RECONCILE_WINDOW_NS = 10 * 60 * 1_000_000_000
# The full reconciliation's pauses before it tries its failed conversations again.
RECONCILE_AGAIN_S = (5.0, 30.0, 120.0)
# The most of a conversation's ids the full reconciliation reads ahead (about 1.5
# MiB); a longer conversation has each page's ids looked up instead.
KNOWN_HELD = 10_000
# Conversations the full reconciliation reads at once: one's libxmtp read overlaps
# the other's store reads and commit (each conversation is still read in order by one).
RECONCILE_AT_ONCE = 2
# How long the start's pass reads a conversation from its mark before it reads the
# whole of it again: a gap below the mark that the catch-up's count check cannot see
# (libxmtp deleted as many expired messages) waits at most this long.
WHOLE_AGAIN_NS = 7 * 24 * 3600 * 1_000_000_000
# Marks the pass keeps in one write: a write per conversation was a commit (and an
# fsync) every few milliseconds; a crash loses at most these, read again next time.
MARKS_AT_ONCE = 500
_HEALED_KEY = "ingest_healed"


def read_from(mark: Mark | None, now_ns: int) -> int:
    """Where the start's pass reads a conversation from: its mark (cone/store/
    reconciled.py), or 0, every message, when it has none, when its last whole read
    began over `WHOLE_AGAIN_NS` ago, or when the clock reads earlier than the mark
    (set back: libxmtp may have stamped messages below the mark meanwhile)."""
    if mark is None or now_ns < mark.through_ns or now_ns - mark.whole_ns > WHOLE_AGAIN_NS:
        return 0
    return mark.through_ns


class Reconciler:
    """Compares libxmtp's messages with the inbox for the ingest, holding the ingest's
    `lock` for one conversation (or one page) at a time, never for a whole pass.

    `record` records a conversation (None: libxmtp does not know it), `listing` gives
    libxmtp's conversation listing, `on_new` is told when messages entered the inbox
    (all the ingest's own)."""

    def __init__(
        self,
        store: Store,
        engine: Reads,
        committer: Committer,
        *,
        lock: asyncio.Lock,
        record: Callable[[str], Awaitable[Conversation | None]],
        listing: Callable[[], Awaitable[list[ListedConversation]]],
        on_new: Callable[[], None],
    ) -> None:
        self._store = store
        self._engine = engine
        self._committer = committer
        self._lock = lock
        self._record = record
        self._listing = listing
        self._on_new = on_new
        # How many messages reconciliation has healed (kept in the store's meta).
        self.healed = 0
        # Marks of conversations the full pass has finished, not yet given to the store.
        self._marks: dict[str, Mark] = {}
        # The conversations each catch-up's window check reads (all, or a turn of them).
        self._window_turns: WindowTurns[ListedConversation] = WindowTurns(lambda c: c.id)

    async def load(self) -> None:
        """Load the healed count from the store."""
        raw = await self._store.read(meta.get, _HEALED_KEY)
        self.healed = int.from_bytes(raw, "big") if raw else 0

    async def reconcile(
        self,
        *,
        full: bool,
        listing: list[ListedConversation] | None = None,
        current: bool = True,
    ) -> int:
        """Compare libxmtp's messages with what cone has read; ingest and report what
        is missing. `full` reads every message (`reconcile_all`); otherwise a recent
        window and a count per conversation (`listing`: libxmtp's listing; in a big
        store a turn of it, cone/core/intake/window_turns.py). A listing that is not
        `current` (one the catch-up kept, cone/core/intake/relisting.py) records no
        conversation: one cone does not record yet waits for a fresh listing. Returns
        how many messages were healed.

        Ingest is held for one conversation at a time, never for the whole pass."""
        if full:
            return await self.reconcile_all()
        healed = 0
        quiet: dict[str, int] = {}  # read points moved in one write at the end
        if listing is None:
            listing = await self._listing()
        for info in self._window_turns.next(listing):
            try:
                async with self._lock:
                    found = await self._reconcile_recent(info, quiet, current)
            except Exception as exc:  # the next pass tries again; others go on
                log.warning("reconciling %s failed: %s", info.id, exc)
                continue
            if found:
                healed += found
                self._on_new()
        if quiet:
            await self._store.write(conversations.set_ingested_many, quiet)
        return healed

    async def reconcile_all(self, listing: list[ListedConversation] | None = None) -> int:
        """Each conversation's messages against what cone has read (each conversation
        of `listing`, libxmtp's listing when the caller has one, else a new one), from
        where the last pass found cone complete (`read_from`), a page of libxmtp's messages at
        a time in each of `RECONCILE_AT_ONCE` conversations (at most about 500
        messages and `KNOWN_HELD` of cone's ids held for each, whatever the history),
        ingest held only while one page commits: streamed messages, reads, receive and
        send go on meanwhile. What is missing is ingested and reported as healed, and
        wakes receivers at once; each conversation's new mark is kept once its pass
        has succeeded. Returns how many messages were healed."""
        started = time.monotonic()
        conversations = listing if listing is not None else await self._listing()
        known_marks = await self._store.read(reconciled.marks)
        now_ns = time.time_ns()
        plan = {info.id: read_from(known_marks.get(info.id), now_ns) for info in conversations}
        whole = sum(1 for since in plan.values() if since == 0)
        # A conversation libxmtp stored nothing in since its mark has nothing to
        # compare: its mark moves to the stamps' read, as a read from it would have.
        newest = await self._engine.newest_stamps() if whole < len(plan) else None
        pending = [
            info
            for info in conversations
            if not self._unchanged(info.id, plan[info.id], known_marks.get(info.id), newest)
        ]
        log.info(
            "full reconciliation of %d conversations started (%d read whole, %d from where "
            "the last pass found cone complete, %d with nothing stored since)",
            len(conversations),
            whole,
            len(pending) - whole,
            len(conversations) - len(pending),
        )
        healed = compared = 0
        failed: list[ListedConversation] = []

        async def one(info: ListedConversation) -> None:
            nonlocal healed, compared
            try:
                found, read = await self._reconcile_all_of(
                    info, plan[info.id], known_marks.get(info.id)
                )
            except Exception as exc:  # tried again later in the pass; others go on
                log.warning("reconciling %s failed: %s", info.id, exc)
                failed.append(info)
                return
            healed += found
            compared += read

        # The first pass, then the conversations whose pass failed, after a pause: a
        # page read that overran its bound while libxmtp was busy (the start's first
        # sync of every group) is read again once it is not.
        for pause in (None, *RECONCILE_AGAIN_S):
            if not pending:
                break
            if pause is not None:
                log.info("reconciling %d conversation(s) again in %.0f s", len(pending), pause)
                await asyncio.sleep(pause)
            await at_once.each(pending, one, RECONCILE_AT_ONCE)
            pending = failed.copy()
            failed.clear()
        self._keep_marks()
        if pending:
            log.warning(
                "%d conversation(s) could not be reconciled (%s); the next start tries again",
                len(pending),
                ", ".join(info.id for info in pending[:3]) + (", …" if len(pending) > 3 else ""),
            )
        log.info(
            "full reconciliation done in %.1f s: %d conversations, %d messages compared, "
            "%d healed (%d conversations read whole)",
            time.monotonic() - started,
            len(conversations),
            compared,
            healed,
            whole,
        )
        return healed

    async def _reconcile_all_of(
        self, info: ListedConversation, since_ns: int, mark: Mark | None
    ) -> tuple[int, int]:
        await _failpoints.reached("reconcile_all")
        async with self._lock:
            conv = await self._record(info.id)
        if conv is None:
            return 0, 0
        # What the read path should already hold: stamped at or below the point the
        # last complete read started from. Anything above it is ordinary news.
        floor = conv.ingested_ns
        # Read whole, the ids cone has read in the conversation, read along its index
        # at once: a lookup of each of libxmtp's ids costs ten times more in a big
        # store, one random page of cone.db each. An id read since is still looked up
        # at commit, as is each id of a read from the mark (most find nothing).
        known: Set[str] = frozenset()
        if since_ns == 0:
            held = await self._store.read(inbox.known_in, info.id, KNOWN_HELD)
            known = held if held is not None else frozenset()
        # Whatever libxmtp stores from here on is stamped no earlier than this, less
        # the read margin (the read path's own rule, cone/core/intake/committing.py).
        started = time.time_ns()
        healed = read = 0
        async for raws in self._engine.message_pages(info.id, since_ns):
            if not raws:  # the usual read from a mark: nothing stored since
                continue
            read += len(raws)
            due = [r for r in raws if r.inserted_at_ns <= floor]
            news = [r for r in raws if r.inserted_at_ns > floor]
            async with self._lock:
                found = await self._committer.commit(info.id, due, known=known)
                fresh = await self._committer.commit(info.id, news, known=known)
                if found:
                    await self._report_healed(info.id, found)
            healed += len(found)
            if found or fresh:
                self._on_new()
        whole_ns = started if since_ns == 0 or mark is None else mark.whole_ns
        self._mark(info.id, Mark(started - READ_MARGIN_NS, whole_ns))
        return healed, read

    def _unchanged(
        self, cid: str, since_ns: int, mark: Mark | None, newest: NewestStamps | None
    ) -> bool:
        """Whether `cid`, to be read from its mark (`since_ns`), has nothing stored
        since; its mark is then moved to when `newest` was read."""
        if since_ns == 0 or mark is None or newest is None:
            return False
        if not newest.nothing_after(cid, since_ns):
            return False
        self._mark(cid, Mark(newest.taken_ns - READ_MARGIN_NS, mark.whole_ns))
        return True

    def _mark(self, cid: str, mark: Mark) -> None:
        """Keep `cid`'s new mark, `MARKS_AT_ONCE` to a write."""
        self._marks[cid] = mark
        if len(self._marks) >= MARKS_AT_ONCE:
            self._keep_marks()

    def _keep_marks(self) -> None:
        if self._marks:
            self._store.write_soon(reconciled.record, self._marks)
            self._marks = {}

    async def _reconcile_recent(
        self, info: ListedConversation, quiet: dict[str, int], current: bool = True
    ) -> int:
        conv = (
            await self._record(info.id)
            if current
            else await self._store.read(conversations.get, info.id)
        )
        if conv is None:
            return 0
        floor = conv.ingested_ns
        started = time.time_ns()
        # The count is taken before the read (see below).
        counted = await self._engine.message_count(info.id)
        raws = await self._engine.messages_since(info.id, max(0, started - RECONCILE_WINDOW_NS))
        due = [r for r in raws if r.inserted_at_ns <= floor]
        news = [r for r in raws if r.inserted_at_ns > floor]
        healed = await self._committer.commit(info.id, due)
        if news:
            await self._committer.commit(info.id, news, floor_ns=started - READ_MARGIN_NS)
        else:
            quiet[info.id] = started - READ_MARGIN_NS
        # Timestamp-free check: libxmtp held `counted` messages before the read
        # began; cone having read fewer means a gap the window did not reach.
        known = await self._store.read(inbox.known_count, info.id)
        if counted > known:
            everything = await self._engine.messages_since(info.id, 0)
            found = await self._committer.commit(info.id, everything)
            healed += found
            if not found:
                log.info(
                    "%s: libxmtp counts %d messages, cone has read %d; a full "
                    "comparison found none missing",
                    info.id,
                    counted,
                    known,
                )
        if healed:
            await self._report_healed(info.id, healed)
        return len(healed)

    async def _report_healed(self, cid: str, ids: list[str]) -> None:
        self.healed += len(ids)
        await self._store.write(meta.put, _HEALED_KEY, self.healed.to_bytes(8, "big"))
        log.warning(
            "reconciliation found %d message(s) in %s that ingest had missed and ingested "
            "them now (%d healed in all); this is a bug, please report it: %s",
            len(ids),
            cid,
            self.healed,
            ", ".join(ids[:5]),
        )


__all__ = [
    "KNOWN_HELD",
    "MARKS_AT_ONCE",
    "RECONCILE_AGAIN_S",
    "RECONCILE_AT_ONCE",
    "RECONCILE_WINDOW_NS",
    "WHOLE_AGAIN_NS",
    "Reconciler",
    "read_from",
]
