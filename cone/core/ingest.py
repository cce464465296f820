"""Ingest: from libxmtp's database into cone's inbox, exactly once, by message id.

libxmtp's timestamps cannot be trusted as a cursor: 1.10 stamps `inserted_at_ns` up
to ~59 s ahead of the clock and falls back at every minute boundary (see
docs/guarantees.md). So nothing here keeps a cursor of libxmtp's; every decision is
by message id, against the ids cone has already read (delivered, or skipped as own,
protocol-only or a repeated send key):

- **Streamed**: a message the stream hands over is committed by its id at once, with
  no read of libxmtp's database: for a conversation cone records already, in one
  write transaction (checking the conversation, the ids cone has read, inserting)
  and no libxmtp call; for a new one, after recording it.
- **Read**: after a sync, a restart or a new conversation, the conversation's
  messages are read from the wall-clock time cone last started a complete read (less
  `READ_MARGIN_NS`). That only needs libxmtp's stamp to be no earlier than the clock
  at insert, which its bug keeps (it only adds).
- **Reconciled**: after start, in the background, every message of every
  conversation a page at a time, and at each catch-up a recent window plus a
  timestamp-free count check, is compared with what cone has read. A message the
  first two paths should have taken and did not is ingested then, counted as
  healed, and logged as a warning: a healed gap is a bug, never silent.

A message cone cannot read (hostile or malformed content, over the size cap) still
enters the inbox as unreadable, with its reason and fallback; a failure in one
message or one conversation never holds back another.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

from cone import _failpoints, metrics
from cone.core.arrivals import bare, initial_consent, to_inbox
from cone.core.waiters import Batch, Waiter, Waiters, hand_out, take_for
from cone.core.window_turns import WindowTurns
from cone.engine.port import ConversationInfo, EnginePort, RawMessage, XmtpConsent
from cone.store import (
    Connection,
    Consent,
    Conversation,
    IncomingMessage,
    Kind,
    Store,
    conversations,
    inbox,
    meta,
)

log = logging.getLogger(__name__)

# How long before a read's start the next read begins: covers a libxmtp insert whose
# stamp was taken before the read started but committed after it.
READ_MARGIN_NS = 10_000_000_000
# The least a catch-up reconciliation looks back (libxmtp's stamps run up to 60 s ahead).
RECONCILE_WINDOW_NS = 10 * 60 * 1_000_000_000
# The full reconciliation's pauses before it tries its failed conversations again.
RECONCILE_AGAIN_S = (5.0, 30.0, 120.0)
# Streamed messages held for one conversation before falling back to a read.
MAX_HELD = 1000
# How soon a conversation whose ingest failed is tried again, and the most it waits.
RETRY_S = 0.5
MAX_RETRY_S = 30.0
_HEALED_KEY = "ingest_healed"


@dataclass
class _Retry:
    delay_s: float = RETRY_S
    logged: bool = False


class Ingestor:
    """Owns the path from libxmtp's database to the inbox."""

    def __init__(
        self,
        store: Store,
        engine: EnginePort,
        on_new: Callable[[], None],
        waiters: Waiters | None = None,
    ) -> None:
        self._store = store
        # Receives waiting now: a streamed commit takes their batches (cone/core/waiters.py).
        self._waiters = waiters or Waiters()
        self._engine = engine
        self._on_new = on_new
        self._streamed: dict[str, dict[str, RawMessage]] = {}
        self._to_read: set[str] = set()
        self._failing: dict[str, _Retry] = {}
        self._all = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        # For each conversation, the newest message libxmtp's listing showed just
        # before cone's last complete read of it (`ingest_all`'s changed_only).
        self._read_at: dict[str, str] = {}
        # The last `ingest_all`: how many conversations it read of how many listed.
        self.last_read = (0, 0)
        self.healed = 0
        # Called after each commit with the messages read for a conversation (deletions
        # and disappearing settings, cone/core/retention.py); None: nothing to call.
        self.after_commit: Callable[[str, list[RawMessage]], Awaitable[None]] | None = None
        # The conversations each catch-up's window check reads (all, or a turn of them).
        self._window_turns: WindowTurns[ConversationInfo] = WindowTurns(lambda c: c.id)
        # libxmtp's conversation listing, fresh (the core's: one listing at a time).
        self.lister: Callable[[], Awaitable[list[ConversationInfo]]] = engine.conversations

    async def start(self) -> None:
        """Load the healed count and start the worker."""
        raw = await self._store.read(meta.get, _HEALED_KEY)
        self.healed = int.from_bytes(raw, "big") if raw else 0
        self._task = asyncio.create_task(self._run(), name="ingest")

    async def stop(self) -> None:
        """Stop the worker."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def accept(self, raw: RawMessage) -> None:
        """Take a message from the stream; it is committed by id shortly."""
        held = self._streamed.setdefault(raw.conversation_id, {})
        held[raw.id] = raw
        if len(held) > MAX_HELD:
            # Falling far behind the stream: let a read of the database take them.
            self._streamed.pop(raw.conversation_id)
            self._to_read.add(raw.conversation_id)
        self._wake.set()

    def mark(self, conversation_id: str) -> None:
        """Note that a conversation may have news in libxmtp's database; it is read soon."""
        self._to_read.add(conversation_id)
        self._wake.set()

    def mark_all(self) -> None:
        """Note that any conversation may have news (after a stream restart)."""
        self._all = True
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._all:
                try:
                    self._to_read |= {info.id for info in await self.lister()}
                    self._all = False  # cleared only once libxmtp listed them
                except Exception as exc:  # listing failed: try again shortly
                    log.warning("listing conversations for ingest failed: %s", exc)
                    asyncio.get_running_loop().call_later(RETRY_S, self._wake.set)
            streamed, self._streamed = self._streamed, {}
            to_read, self._to_read = self._to_read, set()
            new = 0
            async with self._lock:
                for cid in sorted(set(streamed) | to_read):
                    held = list(streamed.get(cid, {}).values())
                    try:
                        # Streamed news of a recorded conversation: one transaction.
                        fast = None if cid in to_read else await self._commit_streamed(cid, held)
                        if fast is None:
                            fast = await self._ingest_conversation(cid, held, cid in to_read)
                        new += fast
                    except Exception as exc:  # one conversation's failure holds back no other
                        self._retry_later(cid, held, exc)
                    else:
                        self._failing.pop(cid, None)
            if new:
                self._on_new()

    def _retry_later(self, cid: str, held: list[RawMessage], exc: Exception) -> None:
        retry = self._failing.setdefault(cid, _Retry())
        level = logging.DEBUG if retry.logged else logging.WARNING
        log.log(level, "ingest of %s failed (%s); retrying in %.1f s", cid, exc, retry.delay_s)
        retry.logged = True
        for raw in held:
            self._streamed.setdefault(cid, {}).setdefault(raw.id, raw)

        def again() -> None:
            self._to_read.add(cid)
            self._wake.set()

        asyncio.get_running_loop().call_later(retry.delay_s, again)
        retry.delay_s = min(retry.delay_s * 2, MAX_RETRY_S)

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold ingest (for a backup's snapshot); marked work waits until release."""
        async with self._lock:
            yield

    async def ingest_all(
        self, listing: list[ConversationInfo] | None = None, *, changed_only: bool = False
    ) -> int:
        """Read every conversation libxmtp knows (`listing`: libxmtp's listing, when
        the caller has just taken it); returns how many messages were new.

        With `changed_only` (after a sync), a conversation is skipped when the newest
        message libxmtp's listing shows for it is the one the listing showed before
        cone's last complete read of it: nothing the listing shows arrived since. The
        listing shows only some content types, newest by the sender's clock, so a
        message it does not show (a type it leaves out, or one stamped older than the
        newest by its sender) is left to the reconciliation: the catch-up's window
        check right after the sync, or the start's full pass (docs/guarantees.md)."""
        if listing is None:
            listing = await self.lister()
        listed = {info.id: info for info in listing}
        wanted: Collection[str] = listed.keys()
        if changed_only:
            wanted = {
                cid
                for cid, info in listed.items()
                if self._read_at.get(cid, None) != info.last_message_id
            }
        self.last_read = (len(wanted), len(listed))
        return await self.ingest(wanted, listed)

    async def ingest(
        self,
        conversation_ids: Iterable[str],
        listed: Mapping[str, ConversationInfo] | None = None,
    ) -> int:
        """Read the given conversations now (`listed`: libxmtp's listing of them, when
        the caller has it); returns how many messages were new.

        A conversation whose read found nothing new has its read point moved in one
        write for all of them at the end, not one synced write each (at 10,000
        conversations that was most of a start). Until that write the old, earlier
        point stands, which only means reading a little more next time."""
        total = 0
        quiet: dict[str, int] = {}
        read_at: dict[str, str] = {}
        async with self._lock:
            for cid in sorted(conversation_ids):
                info = listed.get(cid) if listed is not None else None
                total += await self._ingest_conversation(cid, [], read=True, info=info, quiet=quiet)
                if info is not None:
                    read_at[cid] = info.last_message_id
            if quiet:
                await self._store.write(conversations.set_ingested_many, quiet)
            # Each read is complete (committed, or its point written): what the
            # listing showed before it is now read (see `ingest_all`).
            self._read_at.update(read_at)
        if total:
            self._on_new()
        return total

    async def record(self, info: ConversationInfo) -> Conversation:
        """Make sure cone records a conversation; returns what is recorded."""
        known = await self._store.read(conversations.get, info.id)
        if known is not None:
            return known
        inbox_consent = XmtpConsent.UNKNOWN
        if info.peer_inbox_id:
            inbox_consent = await self._engine.inbox_consent(info.peer_inbox_id)
        consent = initial_consent(info, inbox_consent)
        kind = Kind.GROUP if info.is_group else Kind.DM
        rec = await self._store.write(
            conversations.ensure, info.id, kind, info.peer_inbox_id, consent, time.time_ns()
        )
        if rec.consent is Consent.ACCEPTED:
            self._on_new()
        return rec

    async def _commit_streamed(self, cid: str, held: list[RawMessage]) -> int | None:
        """Streamed messages of a conversation cone records already: checked and
        committed in one write transaction, with no libxmtp call. None when cone does
        not record the conversation yet, or the batch would not store as a whole: the
        full path (`_ingest_conversation`) takes it then."""
        rows: list[IncomingMessage] = []
        skipped: list[str] = []
        for raw in sorted(held, key=_conversation_order):
            row = to_inbox(raw, self._engine.inbox_id)
            if row is None:
                skipped.append(raw.id)
            else:
                rows.append(row)
        waiting = self._waiters.waiting()
        try:
            done = await self._store.write(_commit_if_recorded, cid, rows, skipped, waiting)
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
            await self.after_commit(cid, held)
        return len(committed)

    async def _ingest_conversation(
        self,
        cid: str,
        streamed: list[RawMessage],
        read: bool,
        *,
        info: ConversationInfo | None = None,
        quiet: dict[str, int] | None = None,
    ) -> int:
        info = info or await self._engine.conversation(cid)
        if info is None:
            return 0
        conv = await self.record(info)
        new = len(await self._commit(cid, streamed)) if streamed else 0
        if read:
            started = time.time_ns()
            raws = await self._engine.messages_since(cid, max(0, conv.ingested_ns))
            floor_ns = started - READ_MARGIN_NS
            if quiet is not None and not raws:
                quiet[cid] = floor_ns  # nothing to commit: the caller moves the point
            else:
                new += len(await self._commit(cid, raws, floor_ns=floor_ns))
        return new

    # --- reconciliation ----------------------------------------------------------

    async def reconcile(
        self,
        *,
        full: bool,
        listing: list[ConversationInfo] | None = None,
        current: bool = True,
    ) -> int:
        """Compare libxmtp's messages with what cone has read; ingest and report what
        is missing. `full` reads every message (`reconcile_all`); otherwise a recent
        window and a count per conversation (`listing`: libxmtp's listing; in a big
        store a turn of it, cone/core/window_turns.py). A listing that is not
        `current` (one the catch-up kept, cone/core/relisting.py) records no
        conversation: one cone does not record yet waits for a fresh listing, which
        carries its consent as it is then. Returns how many messages were healed.

        Ingest is held for one conversation at a time, never for the whole pass."""
        if full:
            return await self.reconcile_all()
        healed = 0
        quiet: dict[str, int] = {}  # read points moved in one write at the end
        if listing is None:
            listing = await self.lister()
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

    async def reconcile_all(self) -> int:
        """Every message of every conversation against what cone has read, a page of
        libxmtp's messages at a time (at most about 500 held, whatever the history),
        ingest held only while one page commits: streamed messages, reads, receive and
        send go on meanwhile. What is missing is ingested and reported as healed, and
        wakes receivers at once. Returns how many messages were healed."""
        started = time.monotonic()
        conversations = await self.lister()
        log.info("full reconciliation of %d conversations started", len(conversations))
        healed = compared = 0
        pending = conversations
        # The first pass, then the conversations whose pass failed, after a pause: a
        # page read that overran its bound while libxmtp was busy (the start's first
        # sync of every group) is read again once it is not.
        for pause in (None, *RECONCILE_AGAIN_S):
            if not pending:
                break
            if pause is not None:
                log.info("reconciling %d conversation(s) again in %.0f s", len(pending), pause)
                await asyncio.sleep(pause)
            failed = []
            for info in pending:
                try:
                    found, read = await self._reconcile_all_of(info)
                except Exception as exc:  # tried again later in the pass; others go on
                    log.warning("reconciling %s failed: %s", info.id, exc)
                    failed.append(info)
                    continue
                healed += found
                compared += read
            pending = failed
        if pending:
            log.warning(
                "%d conversation(s) could not be reconciled (%s); the next start tries again",
                len(pending),
                ", ".join(info.id for info in pending[:3]) + (", …" if len(pending) > 3 else ""),
            )
        log.info(
            "full reconciliation done in %.1f s: %d conversations, %d messages compared, %d healed",
            time.monotonic() - started,
            len(conversations),
            compared,
            healed,
        )
        return healed

    async def _reconcile_all_of(self, info: ConversationInfo) -> tuple[int, int]:
        await _failpoints.reached("reconcile_all")
        async with self._lock:
            conv = await self.record(info)
        # What the read path should already hold: stamped at or below the point the
        # last complete read started from. Anything above it is ordinary news.
        floor = conv.ingested_ns
        healed = read = 0
        async for raws in self._engine.message_pages(info.id, 0):
            read += len(raws)
            due = [r for r in raws if r.inserted_at_ns <= floor]
            news = [r for r in raws if r.inserted_at_ns > floor]
            async with self._lock:
                found = await self._commit(info.id, due)
                fresh = await self._commit(info.id, news)
                if found:
                    await self._report_healed(info.id, found)
            healed += len(found)
            if found or fresh:
                self._on_new()
        return healed, read

    async def _reconcile_recent(
        self, info: ConversationInfo, quiet: dict[str, int], current: bool = True
    ) -> int:
        conv = (
            await self.record(info)
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
        healed = await self._commit(info.id, due)
        if news:
            await self._commit(info.id, news, floor_ns=started - READ_MARGIN_NS)
        else:
            quiet[info.id] = started - READ_MARGIN_NS
        # Timestamp-free check: libxmtp held `counted` messages before the read
        # began; cone having read fewer means a gap the window did not reach.
        known = await self._store.read(inbox.known_count, info.id)
        if counted > known:
            everything = await self._engine.messages_since(info.id, 0)
            found = await self._commit(info.id, everything)
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

    # --- committing --------------------------------------------------------------

    async def _commit(
        self, cid: str, raws: list[RawMessage], floor_ns: int | None = None
    ) -> list[str]:
        """Commit the messages cone has not read yet; returns the ids that entered the inbox."""
        new = await self._commit_unread(cid, raws, floor_ns)
        if self.after_commit is not None and raws:
            await self.after_commit(cid, raws)
        return new

    async def _commit_unread(
        self, cid: str, raws: list[RawMessage], floor_ns: int | None
    ) -> list[str]:
        known = await self._store.read(inbox.known_ids, [r.id for r in raws]) if raws else set()
        rows: list[IncomingMessage] = []
        skipped: list[str] = []
        # The conversation's order, as its members see it.
        for raw in sorted((r for r in raws if r.id not in known), key=_conversation_order):
            row = to_inbox(raw, self._engine.inbox_id)
            if row is None:
                skipped.append(raw.id)
            else:
                rows.append(row)
        if not rows and not skipped and floor_ns is None:
            return []
        try:
            committed = await self._store.write(_commit_rows, cid, rows, skipped, floor_ns)
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
        stored: list[IncomingMessage] = []
        for row in rows:
            try:
                new += await self._store.write(_commit_rows, cid, [row], [], None)
                stored.append(row)
            except Exception as exc:
                # A row the store refuses still enters, as its metadata; if even that
                # fails, the store itself is failing: the whole conversation retries.
                kept = bare(row, f"could not be stored: {exc}")
                new += await self._store.write(_commit_rows, cid, [kept], [], None)
                stored.append(kept)
        await self._store.write(_commit_rows, cid, [], skipped, floor_ns)
        _count_arrivals(stored, new)
        return new


def _log_arrivals(rows: list[IncomingMessage], new: list[str]) -> None:
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


def _count_arrivals(rows: list[IncomingMessage], new: list[str]) -> None:
    """`/metrics`: messages that entered the inbox, and how many of them are unreadable."""
    fresh = set(new)
    metrics.INGESTED.inc(len(fresh))
    metrics.UNREADABLE.inc(sum(1 for row in rows if row.id in fresh and row.unreadable))


def _conversation_order(raw: RawMessage) -> tuple[int, str]:
    return raw.sent_at_ns, raw.id


def _commit_if_recorded(
    conn: Connection,
    conversation_id: str,
    rows: list[IncomingMessage],
    skipped: list[str],
    waiting: list[Waiter],
) -> tuple[list[str], list[tuple[Waiter, Batch]]] | None:
    """`_commit_rows` for the messages not read yet, if the conversation is recorded
    (None, writing nothing, when it is not); when any entered the inbox, the waiting
    receives' batches are taken in the same transaction."""
    if conversations.get(conn, conversation_id) is None:
        return None
    known = inbox.known_ids(conn, [r.id for r in rows] + skipped)
    fresh = [r for r in rows if r.id not in known]
    new = _commit_rows(conn, conversation_id, fresh, [s for s in skipped if s not in known], None)
    return new, take_for(conn, waiting) if new else []


def _commit_rows(
    conn: Connection,
    conversation_id: str,
    rows: list[IncomingMessage],
    skipped: list[str],
    floor_ns: int | None,
) -> list[str]:
    new = inbox.insert_messages(conn, rows)
    inbox.skip(conn, conversation_id, skipped)
    if floor_ns is not None:
        conversations.set_ingested(conn, conversation_id, max(0, floor_ns))
    return new
