"""What each operation means: the core, which the daemon's servicer calls.

The core holds the logic once; the servicer only converts proto messages, and the
facades only convert their wire formats into gRPC calls.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cone import PROTOCOL_VERSION, _failpoints
from cone.core import installations
from cone.core.arrivals import decided
from cone.core.attachments import Fetcher
from cone.core.backup import BackupMaker
from cone.core.catch_up import CatchUp
from cone.core.destinations import Destinations
from cone.core.followups import FollowUps
from cone.core.groups import Groups
from cone.core.history import ConversationView, History
from cone.core.ingest import Ingestor
from cone.core.model import Attachment, Message
from cone.core.network import NetworkWatch
from cone.core.outbox import Outbox
from cone.core.receiving import Receiving
from cone.core.restore_fence import RestoreFence
from cone.core.retention import Retention
from cone.core.sending import Sending
from cone.core.status import Status, StatusReport
from cone.engine.port import (
    ConsentUpdate,
    ConversationInfo,
    EnginePort,
    NodeView,
    RawMessage,
)
from cone.errors import (
    ConeError,
    NotFound,
    Unavailable,
    unknown_conversation,
)
from cone.limits import REQUEST_BUDGET, RequestBudget
from cone.store import (
    Consent,
    ContactRecord,
    Kind,
    Request,
    Store,
    attachments,
    conversations,
    meta,
)

log = logging.getLogger(__name__)

#: The store's meta key recording the backend this identity moved to at the V3
#: cutover (`d14n`): later starts open libxmtp there at once.
BACKEND_KEY = "backend"
# The start's full reconciliation reads by a listing at most this old (seconds): the
# first sync's, taken just before it.
RECONCILE_LISTING_AGE_S = 60.0


@dataclass(frozen=True)
class Identity:
    """The public identity."""

    protocol: int
    inbox_id: str
    address: str
    network: str
    installation_id: str
    backend: str = "v3"


class Core:
    """One identity's operations over its store and engine."""

    def __init__(
        self,
        store: Store,
        engine: EnginePort,
        network: str,
        xmtp_db: Path,
        catchup_interval_s: float = 30.0,
        request_budget: RequestBudget = REQUEST_BUDGET,
    ) -> None:
        self.store = store
        self.engine = engine
        self.identity = Identity(
            PROTOCOL_VERSION,
            engine.inbox_id,
            engine.address,
            network,
            engine.installation_id,
            engine.backend,
        )
        # Whether the node answers now and knows this identity (cone/core/network.py).
        self.network = NetworkWatch(
            engine,
            engine.api_url,
            gateway_url=engine.gateway_url,
            period_s=catchup_interval_s,
            on_change=self._on_network_change,
        )
        # Receive, Peek, Ack (cone/core/receiving.py).
        self.receiving = Receiving(store, self._unreachable)
        self.ingestor = Ingestor(
            store, engine, self._notify, self.receiving.waiters, request_budget
        )
        # The sync of every conversation, at start and every period (cone/core/catch_up.py).
        self.catch_up = CatchUp(
            engine,
            self.ingestor,
            catchup_interval_s,
            reconciling=self.reconciling,
            on_back=self._on_network_back,
            caught_up=lambda limit_s: self._follow_ups.caught_up(limit_s),
        )
        self.ingestor.lister = self.catch_up.list  # its listings too, one at a time
        # A restored copy's first send in each conversation (cone/core/restore_fence.py).
        self.restore_fence = RestoreFence(store, engine)
        self.outbox = Outbox(store, engine, self.network, self.restore_fence)
        self.fetcher = Fetcher(store, engine, self.receiving.wake)
        self.backups = BackupMaker(store, engine, self.ingestor, self.outbox, xmtp_db)
        # Conversations, history, contacts, unblock (cone/core/history.py).
        self.history = History(store, engine)
        # createGroup (keyed), members, add, remove, leave, update (cone/core/groups.py).
        # The one resolver of destinations for send, connect and group members.
        self.destinations = Destinations(store, engine)
        # Send and Reply (cone/core/sending.py).
        self.sending = Sending(
            store, engine, self.outbox, self.destinations, self.network, self._known
        )
        self.groups = Groups(
            store,
            engine,
            self.history,
            functools.partial(self.destinations.inbox, field="members", own=True),
            self._on_created,
        )
        # Peers' deletions and disappearing settings (cone/core/retention.py).
        self.retention = Retention(store, engine, self._conversation_ids, catchup_interval_s)
        self.ingestor.after_commit = self.retention.after_commit
        self.outbox.on_published = self._published_in
        self._background: set[asyncio.Task[None]] = set()
        self._reconciling: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._began = time.monotonic()
        self._started = False
        # New conversations synced again soon, and their settings read (cone/core/followups.py).
        self._follow_ups = FollowUps(
            lambda cid: self.engine.sync_conversation(cid), self.ingestor.mark
        )
        self._unread_settings: set[str] = set()
        self._settings_reader: asyncio.Task[None] | None = None
        self._status = StatusReport(self)
        engine.on_switch(self._on_switched)

    # --- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Open what answers from the store, then read, subscribe and sync in the
        background (`_start_reading`): `receive` and the other answers from the store
        are served at once, with `stale` until the first sync is done.

        The store is the truth for what has been received; the start's read and
        sync only add to it, so what `receive` hands out meanwhile is what it would
        hand out after them, and what they add comes after, waking waiting receives."""
        self._began = time.monotonic()
        await self.network.start()
        await self.ingestor.start()
        await self.retention.start()
        self.outbox.start()
        self.fetcher.start()
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
            expected = len(await self.store.read(conversations.all_conversations))
            asked = time.monotonic()
            listing = await self.catch_up.list(expected)
            log.info("listed %d conversations in %.2f s", len(listing), time.monotonic() - asked)
            newest = await self.engine.newest_stamps() if listing else None
            await self.ingestor.ingest_all(listing, newest=newest)
            start_read = self.ingestor.last_read
        except ConeError as exc:  # the first sync reads every conversation again
            log.warning("the start's read failed (%s); the first sync reads again", exc.message)
        read = time.monotonic()
        await _failpoints.reached("start_streams")
        await self.engine.start_streams(
            on_message=self._on_message,
            on_conversation=self._on_conversation,
            on_consent=self._on_consent,
            on_restart=self._on_stream_restart,
        )
        streams = time.monotonic()
        try:
            await self.sync()
        except ConeError as exc:  # the catch-up tries again each period
            log.warning("first sync failed (%s); catching up in the background", exc.message)
        else:
            await self.restore_fence.sweep()
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
        self.retention.watch_settings()
        self._reconciling = asyncio.create_task(self._reconcile_all(), name="reconcile")
        self._background.add(self._reconciling)
        self._reconciling.add_done_callback(self._background.discard)

    async def started(self) -> None:
        """Wait until the start's read and first sync are done (a one-shot command
        hosting the core answers after them, as a fresh start always did)."""
        if self._starting is not None:
            await asyncio.gather(asyncio.shield(self._starting), return_exceptions=True)

    def starting(self) -> bool:
        """Whether the start's read and first sync are still running (answers come
        from the store meanwhile, marked stale)."""
        return not self._started

    async def stop(self) -> None:
        """Stop background work; the store stays open for the caller to close."""
        if self._starting is not None:
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        await self.catch_up.stop()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._follow_ups.stop()
        await self.outbox.stop()
        await self.fetcher.stop()
        await self.retention.stop()
        await self.ingestor.stop()
        await self.network.stop()
        await self.engine.close()

    async def _reconcile_all(self) -> None:
        try:
            # The first sync's listing, taken a moment ago (one listing of 10,000
            # conversations is about a second of libxmtp's): a conversation made since
            # is read by ingest as usual, and whole by the next start's pass.
            listing = await self.catch_up.list(max_age_s=RECONCILE_LISTING_AGE_S)
            await self.ingestor.reconcile_all(listing)
        except Exception:  # its boundary: the next start tries again
            log.exception("the full reconciliation failed; the next start runs it again")

    def reconciling(self) -> bool:
        """Whether the start's full reconciliation is still running."""
        return self._reconciling is not None and not self._reconciling.done()

    async def _conversation_ids(self) -> list[str]:
        # The retention's settings refresh: the conversations cone records (the
        # messages it expires are in its store), not a libxmtp listing of its own.
        # It runs on its own period, which drifts from the catch-up's: sharing the
        # catch-up's listing left it a second listing most periods, often at once.
        return [c.id for c in await self.store.read(conversations.all_conversations)]

    def _on_stream_restart(self) -> None:
        # Whatever the gap skipped is read back from libxmtp's database; a stream that
        # reopens while the network was down means it is back: catch up now. A new
        # DM may have come in the gap: destinations are resolved afresh.
        self.destinations.forget()
        self.ingestor.mark_all()
        self.catch_up.relist()
        if not self.network_ok():
            self.catch_up.now()

    async def _on_switched(self) -> None:
        # libxmtp moved to D14N at the cutover (the engine swapped its client): record
        # it for later starts, report it, and catch up and publish what waits now.
        await self.store.write(meta.put, BACKEND_KEY, self.engine.backend.encode())
        self.identity = replace(self.identity, backend=self.engine.backend)
        self.destinations.forget()
        self.ingestor.mark_all()
        self.catch_up.relist()
        self.catch_up.now()
        self.outbox.retry_now()
        if self.engine.gateway_url:
            # The probe asks what libxmtp now reads: the node the gateway names.
            await self.network.follow(self.engine.gateway_url)

    def _on_network_change(self, before: NodeView, after: NodeView) -> None:
        # The node answers again, or knows this identity again: catch up and publish
        # what waits now, rather than when the backoffs run out.
        if after is NodeView.KNOWS_IDENTITY:
            self.catch_up.now()
            self.outbox.retry_now()

    def _published_in(self, conversation_id: str) -> None:
        self.retention.published(conversation_id)
        self.catch_up.published_in(conversation_id)

    def _notify(self) -> None:
        self.fetcher.wake()  # new messages may carry remote attachments
        self.receiving.wake()

    def _on_message(self, raw: RawMessage) -> None:
        # The stream's echo of a message this cone sent never comes here: the engine
        # drops it on libxmtp's thread, and the outbox tells retention of the send.
        self.ingestor.accept(raw)

    def _on_conversation(self, conversation_id: str) -> None:
        # A peer's second DM may be the one libxmtp now prefers for that peer.
        self.destinations.forget()
        self.ingestor.mark(conversation_id)
        self._follow_up(conversation_id)
        # A new conversation may come with a disappearing setting already on: a burst's
        # new conversations have theirs read together, by one task.
        self._unread_settings.add(conversation_id)
        if self._settings_reader is None or self._settings_reader.done():
            self._settings_reader = asyncio.get_running_loop().create_task(self._read_settings())
            self._background.add(self._settings_reader)
            self._settings_reader.add_done_callback(self._background.discard)

    def _on_created(self, conversation_id: str) -> None:
        # A group this identity made: read it soon, as a new conversation.
        self.ingestor.mark(conversation_id)
        self._follow_up(conversation_id)

    def _on_consent(self, updates: list[ConsentUpdate]) -> None:
        self._in_background(self._apply_consent(updates))

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        # The loop keeps only weak references to tasks: hold it until it is done.
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _follow_up(self, conversation_id: str) -> None:
        """Sync a new conversation a few times soon after it appears, then read it.

        libxmtp's message stream resubscribes to include a new conversation, and a
        message sent in that gap reaches the local database only by a sync; waiting
        for the periodic catch-up would delay it by up to a whole period. A burst's
        follow-ups are one set drained by one task (cone/core/followups.py).
        """
        self._follow_ups.add(conversation_id)

    async def _read_settings(self) -> None:
        while self._unread_settings:
            ids, self._unread_settings = sorted(self._unread_settings), set()
            await self.retention.refresh_quietly(ids)

    async def _apply_consent(self, updates: list[ConsentUpdate]) -> None:
        now = time.time_ns()
        for u in updates:
            wanted = decided(u.consent)
            if wanted is None or u.conversation_id is None:
                continue
            # Not recorded yet: its recording reads XMTP's record again (`Ingestor.record`).
            conv = await self.store.read(conversations.get, u.conversation_id)
            if conv is not None and conv.consent is not wanted:
                await self.store.write(conversations.set_consent, conv.id, wanted, now)
        self._notify()

    # --- operations ----------------------------------------------------------------

    async def sync(self) -> None:
        """A full sync and ingest; Unavailable(reason=sync_failed) on failure."""
        await self.catch_up.sync()

    def _on_network_back(self) -> None:
        # The network is back: reopen streams and publish what waits now, rather
        # than when their backoffs (up to 30 s and 5 min) run out.
        log.warning("the XMTP network answers again; reconnecting and sending what waits")
        self.engine.reconnect_streams()
        self.outbox.retry_now()

    @property
    def last_sync_ns(self) -> int | None:
        """When the last sync succeeded (ns since the epoch)."""
        return self.catch_up.last_sync_ns

    @property
    def last_sync_error(self) -> str | None:
        """Why the last sync failed, while it has not succeeded since."""
        return self.catch_up.last_sync_error

    def stale(self) -> bool:
        """Whether answers from the store may miss what the node holds: the start's
        read and first sync are still running, the node does not answer or know this
        identity (its latest answer), or the last sync failed."""
        return (
            self.starting()
            or self.network.view is not NodeView.KNOWS_IDENTITY
            or self.last_sync_error is not None
        )

    def network_ok(self) -> bool:
        """Whether the network is known reachable: the last sync did not fail."""
        return self.last_sync_error is None

    def _unreachable(self) -> str | None:
        """Why the network cannot be reached now, else None: the last sync failed, or
        the start's first sync has not failed yet but the node does not answer."""
        if not self.network_ok():
            return self.last_sync_error
        if self.starting() and self.network.view is NodeView.NO_ANSWER:
            return self.network.answer.detail
        return None

    async def requests(self) -> list[tuple[Request, str | None]]:
        """Requests with the peer's address where known."""
        held = await self.store.read(conversations.requests)
        out = []
        for r in held:
            addresses = await self.engine.addresses_of(r.peer_inbox_id) if r.peer_inbox_id else []
            out.append((r, addresses[0] if addresses else None))
        return out

    async def request_preview(
        self, conversation_id: str
    ) -> tuple[Request, str | None, Message | None]:
        """A request, its peer's address where known, and its first message: for an
        operator deciding on it; nothing is delivered (cone/core/history.py)."""
        request, first = await self.history.request_preview(conversation_id)
        peer = request.peer_inbox_id
        addresses = await self.engine.addresses_of(peer) if peer else []
        return request, addresses[0] if addresses else None, first

    async def _known(self, conversation_id: str) -> ConversationInfo:
        info = await self.engine.conversation(conversation_id)
        if info is None:
            raise unknown_conversation(conversation_id)
        await self.ingestor.record(info)
        return info

    async def _decide(self, conversation_id: str, consent: Consent) -> None:
        """Record an explicit consent decision, then mirror it into XMTP's records."""
        info = await self._known(conversation_id)
        await self.store.write(conversations.set_consent, conversation_id, consent, time.time_ns())
        self._notify()
        await self.engine.set_consent(
            conversation_id=conversation_id,
            allowed=consent is Consent.ACCEPTED,
            peer_inbox_id=None if info.is_group else info.peer_inbox_id,
        )

    async def accept(self, conversation_id: str) -> None:
        """Let a conversation in; XMTP's consent record follows."""
        await self._decide(conversation_id, Consent.ACCEPTED)

    async def block(self, conversation_id: str) -> None:
        """Exclude a conversation (and a DM's peer inbox everywhere)."""
        await self._decide(conversation_id, Consent.BLOCKED)

    async def connect(self, to: str, name: str | None) -> ContactRecord:
        """Resolve, find or create the DM, accept it, save the contact."""
        inbox_id, address = await self.destinations.inbox(to)
        dm = await self.engine.find_or_create_dm(inbox_id)
        now = time.time_ns()
        await self.store.write(
            conversations.ensure, dm.id, Kind.DM, inbox_id, Consent.ACCEPTED, now
        )
        await self.store.write(conversations.set_consent, dm.id, Consent.ACCEPTED, now)
        if address is None:
            addresses = await self.engine.addresses_of(inbox_id)
            address = addresses[0] if addresses else None
        contact = await self.store.write(
            conversations.save_contact, ContactRecord(inbox_id, name, address, dm.id)
        )
        self.destinations.forget()  # a name may now lead elsewhere
        await self.engine.set_consent(conversation_id=dm.id, allowed=True, peer_inbox_id=inbox_id)
        self.ingestor.mark(dm.id)
        self._follow_up(dm.id)
        self._notify()  # a request's messages (and their attachments) are accepted now
        return contact

    async def attachment(self, message_id: str, index: int) -> Attachment:
        """One attachment of a received message, with its bytes."""
        found = await self.store.read(attachments.get, message_id, index)
        if found is None:
            raise NotFound(
                f"message {message_id} has no attachment {index} in the inbox",
                reason="unknown_message",
                field="messageId",
            )
        if found.data is None:
            raise Unavailable(
                f"the remote attachment of {message_id} is not downloaded yet "
                f"({found.error or 'waiting for its first attempt'}); it is retried",
                reason="attachment_unavailable",
            )
        return found

    # --- reading (cone/core/history.py) and installations --------------------------

    async def conversations(
        self,
        *,
        consumer: str,
        consent: Consent | None,
        kind: Kind | None,
        limit: int | None,
        cursor: str | None,
    ) -> tuple[list[ConversationView], str | None]:
        """A page of conversations by last activity, and the next page's cursor."""
        return await self.history.conversations(
            consumer=consumer, consent=consent, kind=kind, limit=limit, cursor=cursor
        )

    async def messages(
        self,
        *,
        conversation_id: str,
        before: str | None,
        after: str | None,
        limit: int | None,
        oldest_first: bool | None,
    ) -> tuple[list[Message], bool]:
        """A page of an accepted conversation's history, each message as Receive shows it."""
        return await self.history.messages(
            conversation_id=conversation_id,
            before=before,
            after=after,
            limit=limit,
            oldest_first=oldest_first,
        )

    async def contacts(self) -> list[ContactRecord]:
        """The saved contacts."""
        return await self.history.contacts()

    async def unblock(self, conversation_id: str) -> None:
        """A blocked conversation back to a request."""
        await self.history.unblock(conversation_id)
        self._notify()  # the peer's messages in accepted groups are in view again

    async def revoke_installations(
        self, installation_ids: list[str], all_except_this: bool
    ) -> tuple[list[str], int]:
        """Revoke the given installations, or all but this one; (revoked ids, left)."""
        return await installations.revoke(self.engine, installation_ids, all_except_this)

    async def status(self) -> Status:
        """Health and budgets for operators (cone/core/status.py)."""
        return await self._status.report()
