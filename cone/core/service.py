"""The core's host: builds one identity's parts, wires them, starts and stops them.

The operations live in their parts, one class per group of RPCs, which the daemon's
servicer calls directly: `consents` (Requests, RequestPreview, Accept, Block,
Unblock, Connect), `history` (Conversations, Messages, Contacts, Attachment, Resolve),
`sending` (Send, Reply), `receiving` (Receive, Peek, Ack), `groups`, `installations`
(RevokeInstallations), `status` (Identity, Status), `backups` (Backup), the
`intake` (Sync) and `freshness` (the `stale` of answers from the store). The host holds no operation itself: what it keeps is what ties the
parts together (a new conversation, the network back, the backend moved).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from pathlib import Path

from cone.core.attachments import Fetcher
from cone.core.backup import BackupMaker
from cone.core.consents import Consents
from cone.core.destinations import Destinations
from cone.core.freshness import Freshness
from cone.core.groups import Groups
from cone.core.history import History
from cone.core.installations import Installations
from cone.core.intake import Intake
from cone.core.intake.waiters import Waiters
from cone.core.network import NetworkWatch
from cone.core.outbox import Outbox
from cone.core.receiving import Receiving
from cone.core.restore_fence import RestoreFence
from cone.core.retention import Retention
from cone.core.sending import Sending
from cone.core.status import StatusReport
from cone.engine.port import EnginePort, NodeView
from cone.limits import REQUEST_BUDGET, RequestBudget
from cone.store import Store, conversations, meta

log = logging.getLogger(__name__)

#: The store's meta key recording the backend this identity moved to at the V3
#: cutover (`d14n`): later starts open libxmtp there at once.
BACKEND_KEY = "backend"


class Core:
    """One identity's parts over its store and engine, built, started and stopped."""

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
        # Whether the node answers now and knows this identity (cone/core/network.py).
        self.network = NetworkWatch(
            engine,
            engine.api_url,
            gateway_url=engine.gateway_url,
            period_s=catchup_interval_s,
            on_change=self._on_network_change,
        )
        # The one resolver of destinations for send, connect and group members.
        self.destinations = Destinations(store, engine)
        # A restored copy's first send in each conversation (cone/core/restore_fence.py).
        self.restore_fence = RestoreFence(store, engine)
        # Peers' deletions and disappearing settings (cone/core/retention.py).
        self.retention = Retention(store, engine, self._conversation_ids, catchup_interval_s)
        waiters = Waiters()
        # libxmtp's messages into the inbox: the start's read, the streams, the
        # catch-up and the reconciliation (cone/core/intake/); Sync.
        self.intake = Intake(
            store,
            engine,
            waiters=waiters,
            on_new=self._notify,
            after_commit=self.retention.after_commit,
            on_back=self._on_network_back,
            on_conversation=self._on_conversation,
            on_restart=self.destinations.forget,
            after_first_sync=self.restore_fence.sweep,
            on_started=self.retention.watch_settings,
            interval_s=catchup_interval_s,
            budget=request_budget,
        )
        self.freshness = Freshness(self.intake, self.network)
        # Receive, Peek, Ack (cone/core/receiving.py).
        self.receiving = Receiving(store, self.freshness.unreachable, waiters)
        self.fetcher = Fetcher(store, engine, self.receiving.wake)
        self.outbox = Outbox(
            store, engine, self.network, self.restore_fence, on_published=self._published_in
        )
        self.backups = BackupMaker(store, engine, self.intake.ingestor, self.outbox, xmtp_db)
        # Requests, RequestPreview, Accept, Block, Unblock, Connect (cone/core/consents.py).
        self.consents = Consents(store, engine, self.destinations, self.intake, self._notify)
        # Conversations, Messages, Contacts, Attachment, Resolve (cone/core/history.py).
        self.history = History(store, engine)
        # Send and Reply (cone/core/sending.py).
        self.sending = Sending(
            store, engine, self.outbox, self.destinations, self.network, self.intake.recorded
        )
        # CreateGroup (keyed), Members, AddMembers, RemoveMembers, LeaveGroup,
        # UpdateGroup (cone/core/groups.py).
        self.groups = Groups(
            store,
            engine,
            self.history,
            functools.partial(self.destinations.inbox, field="members", own=True),
            self.intake.follow,
        )
        self.installations = Installations(engine)
        # Identity and Status (cone/core/status.py).
        self.status = StatusReport(
            store, engine, network, self.network, self.intake, self.outbox, self.restore_fence
        )
        self._background: set[asyncio.Task[None]] = set()
        self._unread_settings: set[str] = set()
        self._settings_reader: asyncio.Task[None] | None = None
        engine.on_switch(self._on_switched)

    # --- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Open what answers from the store, then read, subscribe and sync in the
        background (cone/core/intake/lifecycle.py): `receive` and the other answers
        from the store are served at once, with `stale` until the first sync is done.

        The store is the truth for what has been received; the start's read and
        sync only add to it, so what `receive` hands out meanwhile is what it would
        hand out after them, and what they add comes after, waking waiting receives."""
        await self.network.start()
        await self.intake.start()
        await self.retention.start()
        self.outbox.start()
        self.fetcher.start()
        self.intake.begin_reading()

    async def started(self) -> None:
        """Wait until the start's read and first sync are done (a one-shot command
        hosting the core answers after them, as a fresh start always did)."""
        await self.intake.started()

    async def stop(self) -> None:
        """Stop background work; the store stays open for the caller to close."""
        await self.intake.stop()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.outbox.stop()
        await self.fetcher.stop()
        await self.retention.stop()
        await self.network.stop()
        await self.engine.close()

    # --- what ties the parts together ------------------------------------------------

    async def _conversation_ids(self) -> list[str]:
        # The retention's settings refresh: the conversations cone records (the
        # messages it expires are in its store), not a libxmtp listing of its own.
        # It runs on its own period, which drifts from the catch-up's: sharing the
        # catch-up's listing left it a second listing most periods, often at once.
        return [c.id for c in await self.store.read(conversations.all_conversations)]

    async def _on_switched(self) -> None:
        # libxmtp moved to D14N at the cutover (the engine swapped its client): record
        # it for later starts, report it, and catch up and publish what waits now.
        await self.store.write(meta.put, BACKEND_KEY, self.engine.backend.encode())
        self.status.moved(self.engine.backend)
        self.destinations.forget()
        self.intake.read_all_now()
        self.outbox.retry_now()
        if self.engine.gateway_url:
            # The probe asks what libxmtp now reads: the node the gateway names.
            await self.network.follow(self.engine.gateway_url)

    def _on_network_change(self, before: NodeView, after: NodeView) -> None:
        # The node answers again, or knows this identity again: catch up and publish
        # what waits now, rather than when the backoffs run out.
        if after is NodeView.KNOWS_IDENTITY:
            self.intake.catch_up.now()
            self.outbox.retry_now()

    def _on_network_back(self) -> None:
        # The network is back: reopen streams and publish what waits now, rather
        # than when their backoffs (up to 30 s and 5 min) run out.
        log.warning("the XMTP network answers again; reconnecting and sending what waits")
        self.engine.reconnect_streams()
        self.outbox.retry_now()

    def _published_in(self, conversation_id: str) -> None:
        self.retention.published(conversation_id)
        self.intake.catch_up.published_in(conversation_id)

    def _notify(self) -> None:
        self.fetcher.wake()  # new messages may carry remote attachments
        self.receiving.wake()

    def _on_conversation(self, conversation_id: str) -> None:
        # A peer's second DM may be the one libxmtp now prefers for that peer.
        self.destinations.forget()
        # A new conversation may come with a disappearing setting already on: a burst's
        # new conversations have theirs read together, by one task.
        self._unread_settings.add(conversation_id)
        if self._settings_reader is None or self._settings_reader.done():
            self._settings_reader = asyncio.get_running_loop().create_task(self._read_settings())
            self._background.add(self._settings_reader)
            self._settings_reader.add_done_callback(self._background.discard)

    async def _read_settings(self) -> None:
        while self._unread_settings:
            ids, self._unread_settings = sorted(self._unread_settings), set()
            await self.retention.refresh_quietly(ids)


__all__ = ["BACKEND_KEY", "Core"]
