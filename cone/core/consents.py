"""Consent: requests, a request's preview, accept, block, unblock and connect.

Only accepted conversations enter `receive`; unknown senders are requests (identity
only, no content); a blocked DM's peer inbox is excluded everywhere. Each decision is
cone's record first, then mirrored into XMTP's consent records.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cone.core.destinations import Destinations
from cone.core.intake import Intake
from cone.core.model import Message
from cone.engine.port import EnginePort
from cone.store import Consent, ContactRecord, Kind, Request, Store, conversations, history


class Consents:
    """Who may reach the inbox, over one store and engine."""

    def __init__(
        self,
        store: Store,
        engine: EnginePort,
        destinations: Destinations,
        intake: Intake,
        on_change: Callable[[], None],
    ) -> None:
        self._store = store
        self._engine = engine
        self._destinations = destinations
        self._intake = intake
        # Wakes receives and the attachments' fetcher: what is in view has changed.
        self._on_change = on_change

    async def _address(self, inbox_id: str) -> str | None:
        addresses = await self._engine.addresses_of(inbox_id) if inbox_id else []
        return addresses[0] if addresses else None

    async def requests(self) -> list[tuple[Request, str | None]]:
        """Requests with the peer's address where known."""
        held = await self._store.read(conversations.requests)
        return [(r, await self._address(r.peer_inbox_id)) for r in held]

    async def request_preview(
        self, conversation_id: str
    ) -> tuple[Request, str | None, Message | None]:
        """A request, its peer's address where known, and its first message as Receive
        would hand it out: for an operator deciding on it; delivered to no one (see
        store.history.request_preview)."""
        request, first = await self._store.read(history.request_preview, conversation_id)
        return request, await self._address(request.peer_inbox_id), first

    async def accept(self, conversation_id: str) -> None:
        """Let a conversation in; XMTP's consent record follows."""
        await self._decide(conversation_id, Consent.ACCEPTED)

    async def block(self, conversation_id: str) -> None:
        """Exclude a conversation (and a DM's peer inbox everywhere)."""
        await self._decide(conversation_id, Consent.BLOCKED)

    async def _decide(self, conversation_id: str, consent: Consent) -> None:
        """Record an explicit consent decision, then mirror it into XMTP's records."""
        info = await self._intake.recorded(conversation_id)
        await self._store.write(conversations.set_consent, conversation_id, consent, time.time_ns())
        self._on_change()
        await self._engine.set_consent(
            conversation_id=conversation_id,
            allowed=consent is Consent.ACCEPTED,
            peer_inbox_id=None if info.is_group else info.peer_inbox_id,
        )

    async def unblock(self, conversation_id: str) -> None:
        """Back to a request (see store.history.unblock); XMTP's records go back to
        unknown for the conversation and a DM's peer inbox."""
        conv = await self._store.write(history.unblock, conversation_id)
        await self._engine.reset_consent(
            conversation_id=conversation_id,
            peer_inbox_id=conv.peer_inbox_id if conv.kind is Kind.DM else None,
        )
        self._on_change()  # the peer's messages in accepted groups are in view again

    async def connect(self, to: str, name: str | None) -> ContactRecord:
        """Resolve, find or create the DM, accept it, save the contact."""
        inbox_id, address = await self._destinations.inbox(to)
        dm = await self._engine.find_or_create_dm(inbox_id)
        now = time.time_ns()
        await self._store.write(
            conversations.ensure, dm.id, Kind.DM, inbox_id, Consent.ACCEPTED, now
        )
        await self._store.write(conversations.set_consent, dm.id, Consent.ACCEPTED, now)
        if address is None:
            address = await self._address(inbox_id)
        contact = await self._store.write(
            conversations.save_contact, ContactRecord(inbox_id, name, address, dm.id)
        )
        self._destinations.forget()  # a name may now lead elsewhere
        await self._engine.set_consent(conversation_id=dm.id, allowed=True, peer_inbox_id=inbox_id)
        self._intake.follow(dm.id)
        self._on_change()  # a request's messages (and their attachments) are accepted now
        return contact


__all__ = ["Consents"]
