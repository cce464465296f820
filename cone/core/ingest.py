"""Ingest: from libxmtp's database into cone's inbox, exactly once, gap-aware.

Stream events only mark a conversation dirty. The ingest worker then reads what
libxmtp inserted for it since the conversation's ingest point (minus a small
overlap, since concurrent inserts may commit out of timestamp order) and commits
new messages to the inbox by their XMTP id before any consumer can see them. After
every stream restart and every periodic catch-up, every conversation is re-read
the same way, so a message a stream skipped is still ingested.

What does not enter the inbox: our own messages, membership changes and other
protocol-only content (group updates, read receipts), and a peer's repeat of a
send key it already used.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from cone.core import content
from cone.engine.engine import ConversationInfo, Engine, RawMessage, XmtpConsent
from cone.store import (
    Connection,
    Consent,
    Conversation,
    IncomingMessage,
    Kind,
    Store,
    conversations,
    inbox,
)

log = logging.getLogger(__name__)

# How far before the recorded ingest point each read starts; duplicates are dropped
# by id, so the overlap costs a little reading and no correctness.
OVERLAP_NS = 2_000_000_000
# How soon a failed ingest pass is tried again.
RETRY_S = 0.5


def initial_consent(info: ConversationInfo, inbox_consent: XmtpConsent) -> Consent:
    """Consent for a conversation cone sees for the first time.

    XMTP's own record wins (it may come from another installation of this inbox).
    An unknown DM from an inbox this identity allowed is accepted; anything else is
    a request: groups are accepted explicitly.
    """
    if info.consent is XmtpConsent.ALLOWED:
        return Consent.ACCEPTED
    if info.consent is XmtpConsent.DENIED or inbox_consent is XmtpConsent.DENIED:
        return Consent.BLOCKED
    if not info.is_group and inbox_consent is XmtpConsent.ALLOWED:
        return Consent.ACCEPTED
    return Consent.REQUESTED


class Ingestor:
    """Owns the path from libxmtp's database to the inbox."""

    def __init__(self, store: Store, engine: Engine, on_new: Callable[[], None]) -> None:
        self._store = store
        self._engine = engine
        self._on_new = on_new
        self._dirty: set[str] = set()
        self._all = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    def start(self) -> None:
        """Start the worker that drains dirty conversations."""
        self._task = asyncio.create_task(self._run(), name="ingest")

    async def stop(self) -> None:
        """Stop the worker."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def mark(self, conversation_id: str) -> None:
        """Note that a conversation has news; the worker reads it soon."""
        self._dirty.add(conversation_id)
        self._wake.set()

    def mark_all(self) -> None:
        """Note that any conversation may have news (after a stream restart)."""
        self._all = True
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._dirty = self._dirty, set()
            try:
                if self._all:
                    # Cleared only once libxmtp listed them (a failure retries it).
                    batch |= {info.id for info in await self._engine.conversations()}
                    self._all = False
                await self.ingest(batch)
            except Exception:  # keep ingesting: this batch is retried shortly
                log.exception("ingest failed; retrying in %.1f s", RETRY_S)
                self._dirty |= batch
                asyncio.get_running_loop().call_later(RETRY_S, self._wake.set)

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold ingest (for a backup's snapshot); marked work waits until release."""
        async with self._lock:
            yield

    async def ingest_all(self) -> int:
        """Read every conversation libxmtp knows; returns how many messages were new."""
        return await self.ingest([info.id for info in await self._engine.conversations()])

    async def ingest(self, conversation_ids: set[str] | list[str]) -> int:
        """Ingest the given conversations now; returns how many messages were new."""
        total = 0
        async with self._lock:
            for cid in sorted(conversation_ids):
                total += await self._ingest_one(cid)
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

    async def _ingest_one(self, conversation_id: str) -> int:
        info = await self._engine.conversation(conversation_id)
        if info is None:
            return 0
        conv = await self.record(info)
        raws = await self._engine.messages_since(
            conversation_id, max(0, conv.ingested_ns - OVERLAP_NS)
        )
        if not raws:
            return 0
        rows = [row for raw in raws if (row := self._to_inbox(raw)) is not None]
        last = max(raw.inserted_at_ns for raw in raws)
        new = await self._store.write(_insert_and_advance, conversation_id, rows, last)
        return len(new)

    def _to_inbox(self, raw: RawMessage) -> IncomingMessage | None:
        if not raw.application or raw.sender_inbox_id == self._engine.inbox_id:
            return None
        decoded = content.decode(raw.content)
        if decoded.protocol_only:
            return None
        return IncomingMessage(
            id=raw.id,
            conversation_id=raw.conversation_id,
            sender_inbox_id=raw.sender_inbox_id,
            sent_at_ns=raw.sent_at_ns,
            content_type=decoded.content_type,
            text=decoded.text,
            data_json=decoded.data_json,
            reply_to=decoded.reply_to,
            fallback=decoded.fallback,
            send_key=decoded.send_key,
        )


def _insert_and_advance(
    conn: Connection, conversation_id: str, rows: list[IncomingMessage], last_ns: int
) -> list[str]:
    new = inbox.insert_messages(conn, rows)
    conversations.set_ingested(conn, conversation_id, last_ns)
    return new
