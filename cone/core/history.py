"""Conversations, history, contacts and unblocking: reading what cone holds.

Nothing here changes a receipt. Listings come from cone's store (one query a page),
with what only libxmtp knows (a group's name, description, image, members) read for
that page alone. A listing is ordered by when cone first saw each conversation, and
its `createdAt` is that time (libxmtp's own creation time can disagree with it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from cone.core import content, validate
from cone.engine.port import EnginePort
from cone.store import (
    Consent,
    ContactRecord,
    Kind,
    Store,
    StoredMessage,
    conversations,
    history,
)


@dataclass(frozen=True)
class HistoryMessage:
    """One message of a conversation's history."""

    message: StoredMessage  # `removed` set for a deleted message (expired ones are omitted)
    own: bool


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

    def __init__(self, store: Store, engine: EnginePort) -> None:
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
        """A page of conversations, newest first, and the next page's cursor."""
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
        details = await self._engine.groups.details([r.conversation.id for r in rows])
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
            d = details.get(conv.id)
            address = r.contact_address
            members = None
            if conv.kind is Kind.DM and address is None:
                found = addresses.get(conv.peer_inbox_id)
                address = found[0] if found else None
            if conv.kind is Kind.GROUP and d is not None:
                members = await self._engine.groups.member_count(conv.id)
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
                    member_count=members,
                    # The listing's order (store.history.conversations): libxmtp's own
                    # creation time can disagree with it (a welcome processed late).
                    created_ns=conv.first_seen_ns,
                    last_message_ns=r.last_message_ns,
                    pending=r.pending,
                    active=(d.active if d else True) and not r.left,
                )
            )
        return out

    async def messages(
        self,
        *,
        conversation_id: str,
        before: str | None,
        after: str | None,
        limit: int | None,
        oldest_first: bool | None,
    ) -> tuple[list[HistoryMessage], bool]:
        """A page of an accepted conversation's history (see store.history)."""
        limit = validate.receive_limit(limit)
        if oldest_first is None:
            oldest_first = after is not None and before is None
        rows, more, kind = await self._store.read(
            functools.partial(
                history.messages,
                conversation_id=conversation_id,
                own_inbox_id=self._engine.inbox_id,
                before=before,
                after=after,
                limit=limit,
                oldest_first=oldest_first,
            )
        )
        return [_message(conversation_id, kind, r) for r in rows], more

    async def contacts(self) -> list[ContactRecord]:
        """The saved contacts."""
        return await self._store.read(history.contacts)

    async def unblock(self, conversation_id: str) -> None:
        """Back to a request (see store.history.unblock); XMTP's records go back to
        unknown for the conversation and a DM's peer inbox."""
        conv = await self._store.write(history.unblock, conversation_id)
        await self._engine.reset_consent(
            conversation_id=conversation_id,
            peer_inbox_id=conv.peer_inbox_id if conv.kind is Kind.DM else None,
        )


def _message(conversation_id: str, kind: Kind, r: history.HistoryRow) -> HistoryMessage:
    if r.own_payload is not None:
        decoded = content.decode(r.own_payload)
        stored = StoredMessage(
            seq=0,
            id=r.id,
            conversation_id=conversation_id,
            kind=kind,
            sender_inbox_id=r.sender_inbox_id,
            sent_at_ns=r.sent_at_ns,
            content_type=decoded.content_type,
            text=decoded.text,
            data_json=decoded.data_json,
            reply_to=decoded.reply_to,
            fallback=None,
            deliveries=0,
            unreadable=decoded.unreadable,
        )
        return HistoryMessage(stored, own=True)
    stored = StoredMessage(
        seq=r.seq,
        id=r.id,
        conversation_id=conversation_id,
        kind=kind,
        sender_inbox_id=r.sender_inbox_id,
        sent_at_ns=r.sent_at_ns,
        content_type=r.content_type,
        text=r.text,
        data_json=r.data_json,
        reply_to=r.reply_to,
        fallback=r.fallback,
        deliveries=0,
        unreadable=r.unreadable,
        removed=r.removed,
    )
    return HistoryMessage(stored, own=False)
