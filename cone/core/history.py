"""Conversations, history, contacts, attachments and which conversation a destination
names: reading what cone holds.

Nothing here changes a receipt. Listings come from cone's store (one query a page).
What only libxmtp knows (a group's name, description, image, member count) is kept in
the store too, as last read, and read from libxmtp again for a conversation that
never was or has taken in a group update since (cone/store/details.py). A listing is
ordered by last activity, most recent first: its newest message taken in or sent,
or its `createdAt` (when cone first saw it; libxmtp's own creation time can
disagree), whichever is later (the store keeps it: cone/store/history.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol

from cone import destination, limits
from cone.core import validate
from cone.core.model import Attachment, Message, inline_bytes, own_message
from cone.engine.port import Identified
from cone.engine.roles.groups import WithGroups
from cone.errors import NotFound, Unavailable
from cone.store import (
    Consent,
    ContactRecord,
    Kind,
    OwnMessage,
    Store,
    StoredMessage,
    attachments,
    conversations,
    details,
    history,
)
from cone.store.details import KnownDetails, ReadDetails

# The listing's largest page (ConversationsRequest.limit), for Resolve's reading of it.
_PAGE = 1000


class HistoryRoles(Identified, WithGroups, Protocol):
    """What listings and history use of the engine: who it is, and groups' details."""


@dataclass(frozen=True)
class ConversationView:
    """One conversation of a listing."""

    id: str
    kind: Kind
    consent: Consent
    peer_inbox_id: str
    peer_address: str | None
    contact_name: str | None
    name: str | None
    description: str | None
    image_url: str | None
    member_count: int | None
    created_ns: int
    last_message_ns: int | None
    pending: int
    active: bool


class History:
    """The read side of conversations, over one store and engine."""

    def __init__(self, store: Store, engine: HistoryRoles) -> None:
        self._store = store
        self._engine = engine

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
        consumer = validate.consumer(consumer)
        limit = validate.receive_limit(limit)
        rows, next_cursor = await self._store.read(
            functools.partial(
                history.conversations,
                consumer=consumer,
                consent=consent,
                kind=kind,
                limit=limit,
                cursor=cursor,
            )
        )
        return await self._views(rows), next_cursor

    async def one(self, conversation_id: str, consumer: str = "") -> ConversationView:
        """One conversation as a listing shows it."""
        rows, _ = await self._store.read(
            functools.partial(
                history.conversations,
                consumer=validate.consumer(consumer),
                consent=None,
                kind=None,
                limit=1,
                cursor=None,
                only=conversation_id,
            )
        )
        if not rows:
            await self._store.read(conversations.require, conversation_id)  # NotFound
        return (await self._views(rows))[0]

    async def _views(self, rows: list[history.ConversationRow]) -> list[ConversationView]:
        known = await self._details(rows)
        unknown = [
            r.conversation.peer_inbox_id
            for r in rows
            if r.conversation.kind is Kind.DM
            and r.contact_address is None
            and r.conversation.peer_inbox_id
        ]
        addresses = await self._engine.groups.addresses(unknown)
        out = []
        for r in rows:
            conv = r.conversation
            d = known.get(conv.id)
            address = r.contact_address
            if conv.kind is Kind.DM and address is None:
                found = addresses.get(conv.peer_inbox_id)
                address = found[0] if found else None
            out.append(
                ConversationView(
                    id=conv.id,
                    kind=conv.kind,
                    consent=conv.consent,
                    peer_inbox_id=conv.peer_inbox_id,
                    peer_address=address if conv.kind is Kind.DM else None,
                    contact_name=r.contact_name,
                    name=d.name if d else None,
                    description=d.description if d else None,
                    image_url=d.image_url if d else None,
                    member_count=d.member_count if d and conv.kind is Kind.GROUP else None,
                    # The listing's order (store.history.conversations): libxmtp's own
                    # creation time can disagree with it (a welcome processed late).
                    created_ns=conv.first_seen_ns,
                    last_message_ns=r.last_message_ns,
                    pending=r.pending,
                    active=(d.active if d else True) and not r.left,
                )
            )
        return out

    async def _details(self, rows: list[history.ConversationRow]) -> dict[str, KnownDetails]:
        """The rows' details: as cone keeps them where current, else read from libxmtp
        (one hop, and a member listing per group) and kept for the next listing. A
        conversation libxmtp cannot read has none."""
        out = {r.conversation.id: r.details for r in rows if r.details is not None}
        stale = [r for r in rows if r.details is None]
        if not stale:
            return out
        found = await self._engine.groups.details([r.conversation.id for r in stale])
        read = []
        for r in stale:
            d = found.get(r.conversation.id)
            if d is None:
                continue
            members = await self._engine.groups.member_count(d.id) if d.is_group else None
            kept = KnownDetails(d.name, d.description, d.image_url, members, d.active)
            out[d.id] = kept
            read.append(ReadDetails(d.id, r.changes, kept))
        if read:
            # A cache: lost in a crash, it is read again.
            self._store.write_soon(details.record, read)
        return out

    async def messages(
        self,
        *,
        conversation_id: str,
        before: str | None,
        after: str | None,
        limit: int | None,
        oldest_first: bool | None,
    ) -> tuple[list[Message], bool]:
        """A page of an accepted conversation's history (see store.history): each
        message as Receive hands it out (cone.core.model), own ones marked `own`."""
        limit = validate.receive_limit(limit)
        if oldest_first is None:
            oldest_first = after is not None and before is None
        rows, more = await self._store.read(
            functools.partial(
                history.messages,
                conversation_id=conversation_id,
                before=before,
                after=after,
                limit=limit,
                oldest_first=oldest_first,
            )
        )
        # Files' bytes come inline within Receive's budget for the page, inbox
        # messages' first (the store has bounded those), then own messages'.
        budget = limits.RECEIVE_INLINE_BUDGET_BYTES - inline_bytes(
            r for r in rows if isinstance(r, StoredMessage)
        )
        out = []
        for r in rows:
            if isinstance(r, OwnMessage):
                m = own_message(r, self._engine.inbox_id, budget)
                budget -= inline_bytes([m])
            else:
                m = r
            out.append(m)
        return out, more

    async def contacts(self) -> list[ContactRecord]:
        """The saved contacts."""
        return await self._store.read(history.contacts)

    async def resolve(self, to: str) -> str:
        """The conversation `to` names, found without making or accepting one: a saved
        contact name first, then a conversation id (returned as given), an inbox id
        (64 hex digits, unless a conversation has them) or an address, each naming
        the direct conversation with that peer (docs/messages.md, "Destinations")."""
        destination.check(to)
        if destination.is_name(to):
            for contact in await self.contacts():
                if contact.name == to:
                    return contact.conversation_id
        lowered = to.lower()
        if destination.is_id(lowered) and len(lowered) != destination.INBOX_ID_CHARS:
            return lowered
        if destination.is_id(lowered) or destination.is_address(lowered):
            found = await self._direct(lowered)
            if found is not None:
                return found
            raise NotFound(
                f"no conversation with {to} is known to this inbox: `cone send` or "
                "`cone connect` starts one",
                reason="unknown_destination",
                field="to",
            )
        raise NotFound(
            f"no contact is saved as {to!r}: give a conversation id, a saved contact name, "
            "an inbox id or an address (`cone contacts` lists the names)",
            reason="unknown_destination",
            field="to",
        )

    async def _direct(self, peer: str) -> str | None:
        """The conversation with id `peer` (64 hex digits), else the direct conversation
        whose peer has this inbox id or address: a saved contact's first, else the most
        recently active."""
        for contact in await self.contacts():
            if peer in (contact.inbox_id, (contact.address or "").lower()):
                return contact.conversation_id
        direct: str | None = None
        cursor: str | None = None
        while True:
            views, cursor = await self.conversations(
                consumer="", consent=None, kind=None, limit=_PAGE, cursor=cursor
            )
            for v in views:
                if v.id == peer:
                    return peer
                if direct is None and v.kind is Kind.DM:
                    if peer in (v.peer_inbox_id, (v.peer_address or "").lower()):
                        direct = v.id
            if cursor is None:
                return direct

    async def attachment(self, message_id: str, index: int) -> Attachment:
        """One attachment of a received message, with its bytes."""
        found = await self._store.read(attachments.get, message_id, index)
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
