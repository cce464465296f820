"""What the Status RPC reports: health, budgets and warnings for operators."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from cone.core.identity import Identity, identity_of
from cone.core.intake import Intake
from cone.core.network import ADVICE, STATUS_PROBE_S, NetworkWatch
from cone.core.outbox import Outbox
from cone.core.restore_fence import RestoreFence
from cone.engine.port import EnginePort, NodeView, StreamHealth
from cone.errors import ConeError
from cone.store import Store, conversations, held, inbox
from cone.store.outbox import OutboxRecord

log = logging.getLogger(__name__)

INSTALLATION_LIMIT = 10
UPDATE_LIMIT = 256


@dataclass
class Status:
    """What the Status RPC reports."""

    identity: Identity
    streams: list[StreamHealth]
    last_sync_ns: int | None
    last_sync_error: str | None
    inbox_messages: int
    consumers: list[tuple[str, int]]
    requests: int
    installations: int
    identity_updates: int
    outbox: list[OutboxRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    ingest_healed: int = 0
    network: str = "reachable"
    requests_dropped: int = 0


class StatusReport:
    """Identity and Status: who this is, and its health and budgets; keeps libxmtp's
    last budget figures for when it cannot read them."""

    def __init__(
        self,
        store: Store,
        engine: EnginePort,
        network_name: str,
        network: NetworkWatch,
        intake: Intake,
        outbox: Outbox,
        restore_fence: RestoreFence,
    ) -> None:
        self._store = store
        self._engine = engine
        self._network = network
        self._intake = intake
        self._outbox = outbox
        self._restore_fence = restore_fence
        self._budgets = (0, 0)
        self._identity = identity_of(engine, network_name)

    def identity(self) -> Identity:
        """The public identity."""
        return self._identity

    def moved(self, backend: str) -> None:
        """The backend this identity moved to at the cutover, once the store records
        it: reported from then on."""
        self._identity = replace(self._identity, backend=backend)

    async def report(self) -> Status:
        """Health and budgets for operators."""
        store, engine, intake = self._store, self._engine, self._intake
        messages = await store.read(inbox.message_count)
        consumers = await store.read(inbox.pending_counts)
        requests = await store.read(conversations.requests)
        dropped = await store.read(held.dropped_count)
        try:
            self._budgets = await engine.budgets()
        except ConeError as exc:
            # Status is answered anyway, with the last figures libxmtp gave.
            log.info("status: libxmtp's inbox state not read (%s)", exc.message)
        installations, updates = self._budgets
        warnings = []
        if installations >= INSTALLATION_LIMIT - 2:
            warnings.append(
                f"the inbox has {installations} of {INSTALLATION_LIMIT} installations: "
                "revoke unused ones before adding more"
            )
        if updates >= UPDATE_LIMIT - 26:
            warnings.append(f"the inbox has used {updates} of {UPDATE_LIMIT} identity updates")
        # Asked now (at most STATUS_PROBE_S): whether the node answers is never older
        # than this call (docs/networks.md).
        answer = await self._network.check(STATUS_PROBE_S)
        network = answer.view.value
        if engine.v3_cutover():
            network = "v3_cutover"
            warnings.append(
                "the XMTP node refuses this cone as a V3 client after its cutover to the "
                "decentralized network (D14N): nothing can be sent; see docs/networks.md"
            )
        elif answer.view is NodeView.NO_ANSWER:
            warnings.append(
                f"the XMTP network at {engine.api_url} cannot be reached "
                f"({answer.detail}): sends wait in the outbox and cone reconnects by itself"
            )
        elif answer.view is NodeView.IDENTITY_UNKNOWN:
            warnings.append(
                f"the XMTP node at {engine.api_url}: {ADVICE} ({answer.detail}); "
                "sends fail with identity_unknown"
            )
        if intake.starting():
            warnings.append(
                "cone is starting: it still reads what libxmtp holds and syncs with the "
                "network; answers come from the store and may lack messages that arrived "
                "while it was stopped (they enter the inbox when the first sync is done)"
            )
        if intake.last_sync_error:
            warnings.append(f"the last sync failed: {intake.last_sync_error}")
        healed = intake.ingestor.reconciler.healed  # one count for the warning and the field
        if healed:
            warnings.append(
                f"reconciliation has ingested {healed} message(s) that ingest had missed "
                "(see the log); please report it"
            )
        if self._restore_fence.forked:
            warnings.append(
                f"{self._restore_fence.forked} conversation(s) were moved on by this "
                "identity's original installation after the backup this copy was restored "
                "from: sends there are refused (restore_forked; docs/backup.md)"
            )
        if dropped:
            warnings.append(
                f"{dropped} message(s) of requests were dropped over the request budget "
                "(docs/guarantees.md): accept or block the requests you know"
            )
        return Status(
            identity=self.identity(),
            streams=engine.stream_health(),
            last_sync_ns=intake.last_sync_ns,
            last_sync_error=intake.last_sync_error,
            inbox_messages=messages,
            consumers=consumers,
            requests=len(requests),
            installations=installations,
            identity_updates=updates,
            outbox=await self._outbox.unsettled(),
            warnings=warnings,
            ingest_healed=healed,
            network=network,
            requests_dropped=dropped,
        )


__all__ = ["INSTALLATION_LIMIT", "UPDATE_LIMIT", "Status", "StatusReport"]
