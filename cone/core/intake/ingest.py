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
  at insert, which its bug keeps (it only adds). At a start, a conversation whose
  newest stamp in libxmtp's database is at or below that point is not read at all
  (cone/engine/_stamps.py: one read for every conversation).
- **Reconciled**: after start, in the background, every message of every
  conversation a page at a time, and at each catch-up a recent window plus a
  timestamp-free count check, is compared with what cone has read. A message the
  first two paths should have taken and did not is ingested then, counted as
  healed, and logged as a warning: a healed gap is a bug, never silent.

A message cone cannot read (hostile or malformed content, over the size cap) still
enters the inbox as unreadable, with its reason and fallback; a failure in one
message or one conversation never holds back another.

`Ingestor` runs the first two paths; the commit by id is cone/core/intake/committing.py's,
the third path cone/core/intake/reconciliation.py's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from cone.core.intake.arrivals import decided, initial_consent
from cone.core.intake.committing import READ_MARGIN_NS, AfterCommit, Committer
from cone.core.intake.reconciliation import Reconciler
from cone.core.intake.waiters import Waiters
from cone.engine.port import (
    ConversationInfo,
    Identified,
    ListedConversation,
    NewestStamps,
    RawMessage,
    XmtpConsent,
)
from cone.engine.roles.consent import Consents
from cone.engine.roles.reads import Reads
from cone.limits import REQUEST_BUDGET, RequestBudget
from cone.store import Consent, Conversation, Kind, Store, conversations

log = logging.getLogger("cone.core.ingest")  # the lines people know by this name

# Streamed messages held for one conversation before falling back to a read.
MAX_HELD = 1000
# How soon a conversation whose ingest failed is tried again, and the most it waits.
RETRY_S = 0.5
MAX_RETRY_S = 30.0


class IngestRoles(Identified, Reads, Consents, Protocol):
    """What the ingest uses of the engine: libxmtp's database and XMTP's consent records."""


@dataclass
class _Retry:
    delay_s: float = RETRY_S
    logged: bool = False


class Ingestor:
    """Owns the path from libxmtp's database to the inbox."""

    def __init__(
        self,
        store: Store,
        engine: IngestRoles,
        on_new: Callable[[], None],
        waiters: Waiters | None = None,
        budget: RequestBudget = REQUEST_BUDGET,
        *,
        lister: Callable[[], Awaitable[list[ListedConversation]]] | None = None,
        after_commit: AfterCommit | None = None,
    ) -> None:
        self._store = store
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
        # Receives waiting now: a streamed commit takes their batches (cone/core/intake/waiters.py).
        # What requests may hold (cone/store/held.py).
        self._committer = Committer(
            store, engine.inbox_id, waiters or Waiters(), budget, after_commit
        )
        # libxmtp's conversation listing, fresh (the intake's: one listing at a time).
        self.lister = lister or engine.conversations
        # What ingest missed, found by comparing with libxmtp (callers use it directly).
        self.reconciler = Reconciler(
            store,
            engine,
            self._committer,
            lock=self._lock,
            record=self.recorded,
            listing=self.lister,
            on_new=on_new,
        )

    async def start(self) -> None:
        """Load the healed count and start the worker."""
        await self.reconciler.load()
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
                        fast = (
                            None
                            if cid in to_read
                            else await self._committer.commit_streamed(cid, held)
                        )
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
        self,
        listing: list[ListedConversation] | None = None,
        *,
        changed_only: bool = False,
        newest: NewestStamps | None = None,
    ) -> int:
        """Read every conversation libxmtp knows (`listing`: libxmtp's listing, when
        the caller has just taken it); returns how many messages were new. With
        `newest` (read after the listing), a conversation cone records whose newest
        stamp is at or below its read point is not read: the read would find nothing.

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
        total, read = await self._ingest(wanted, listed, newest)
        self.last_read = (read, len(listed))
        return total

    async def ingest(
        self,
        conversation_ids: Iterable[str],
        listed: Mapping[str, ListedConversation] | None = None,
    ) -> int:
        """Read the given conversations now (`listed`: libxmtp's listing of them, when
        the caller has it); returns how many messages were new.

        A conversation whose read found nothing new has its read point moved in one
        write for all of them at the end, not one synced write each (at 10,000
        conversations that was most of a start). Until that write the old, earlier
        point stands, which only means reading a little more next time."""
        total, _ = await self._ingest(conversation_ids, listed, None)
        return total

    async def _ingest(
        self,
        conversation_ids: Iterable[str],
        listed: Mapping[str, ListedConversation] | None,
        newest: NewestStamps | None,
    ) -> tuple[int, int]:
        """`ingest`, skipping what `newest` shows unchanged; (new messages, reads)."""
        total = reads = 0
        quiet: dict[str, int] = {}
        read_at: dict[str, str] = {}
        async with self._lock:
            points = await self._store.read(conversations.ingested_points) if newest else {}
            for cid in sorted(conversation_ids):
                point = points.get(cid)
                if newest is not None and point is not None and newest.nothing_after(cid, point):
                    # Stored nothing past the point when the stamps were read: as a
                    # read begun then that found nothing.
                    quiet[cid] = newest.taken_ns - READ_MARGIN_NS
                else:
                    reads += 1
                    total += await self._ingest_conversation(cid, [], read=True, quiet=quiet)
                info = listed.get(cid) if listed is not None else None
                if info is not None:
                    read_at[cid] = info.last_message_id
            if quiet:
                await self._store.write(conversations.set_ingested_many, quiet)
            # Each read is complete (committed, or its point written): what the
            # listing showed before it is now read (see `ingest_all`).
            self._read_at.update(read_at)
        if total:
            self._on_new()
        return total, reads

    async def recorded(self, conversation_id: str) -> Conversation | None:
        """cone's record of a conversation, made first when there is none from
        libxmtp's summary of it (read only then); None when libxmtp does not know it."""
        known = await self._store.read(conversations.get, conversation_id)
        if known is not None:
            return known
        info = await self._engine.conversation(conversation_id)
        return await self.record(info) if info is not None else None

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
        if rec.consent is consent:  # this insert's (not a record made meanwhile)
            rec = await self._consent_since(rec)
        if rec.consent is Consent.ACCEPTED:
            self._on_new()
        return rec

    async def _consent_since(self, rec: Conversation) -> Conversation:
        """A new record, with XMTP's consent record read again once it is in the store.
        A change made between the read `info` came from (a listing may be seconds old)
        and the insert reached `Intake._apply_consent` while the conversation was not
        recorded, which dropped it; a later change finds the record."""
        now = await self._engine.conversation(rec.id)
        wanted = decided(now.consent) if now is not None else None
        if wanted is None or wanted is rec.consent:
            return rec
        return await self._store.write(conversations.set_consent, rec.id, wanted, time.time_ns())

    async def _ingest_conversation(
        self,
        cid: str,
        streamed: list[RawMessage],
        read: bool,
        *,
        quiet: dict[str, int] | None = None,
    ) -> int:
        conv = await self.recorded(cid)
        if conv is None:
            return 0
        new = len(await self._committer.commit(cid, streamed)) if streamed else 0
        if read:
            started = time.time_ns()
            raws = await self._engine.messages_since(cid, max(0, conv.ingested_ns))
            floor_ns = started - READ_MARGIN_NS
            if quiet is not None and not raws:
                quiet[cid] = floor_ns  # nothing to commit: the caller moves the point
            else:
                new += len(await self._committer.commit(cid, raws, floor_ns=floor_ns))
        return new


__all__ = ["MAX_HELD", "MAX_RETRY_S", "READ_MARGIN_NS", "RETRY_S", "Ingestor"]
