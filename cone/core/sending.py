"""Send and Reply: one logical message per key, to a destination or into an
accepted conversation (the outbox delivers it, cone/core/outbox.py)."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from cone._fs import free_bytes
from cone.core import validate
from cone.core.content import Outgoing
from cone.core.destinations import Destinations
from cone.core.network import NetworkWatch
from cone.core.outbox import Outbox, SendResult, check_content
from cone.engine.port import ConversationInfo, Identified
from cone.engine.roles.consent import Consents
from cone.engine.roles.directory import Directory
from cone.errors import (
    UNKNOWN_CONVERSATION,
    FailedPrecondition,
    NotFound,
    StateError,
)
from cone.store import Kind, Store, conversations, inbox
from cone.store.outbox import by_message_id

# Below this much free space on the state directory's disk, sends are refused at once.
MIN_FREE_BYTES = 1024 * 1024


class SendingRoles(Identified, Directory, Consents, Protocol):
    """What sending uses of the engine: the DM with a peer, and consent."""


class Sending:
    """Send and Reply over the outbox, with the checks before a key is claimed."""

    def __init__(
        self,
        store: Store,
        engine: SendingRoles,
        outbox: Outbox,
        destinations: Destinations,
        network: NetworkWatch,
        record_unknown: Callable[[str], Awaitable[ConversationInfo]],
    ) -> None:
        self._store = store
        self._engine = engine
        self._outbox = outbox
        self._destinations = destinations
        self._network = network
        # Records a conversation libxmtp knows and the store does not yet.
        self._record_unknown = record_unknown
        self._own_inbox_id = engine.inbox_id

    async def _open_dm(self, inbox_id: str) -> str:
        """The accepted DM with an inbox; sending there accepts it."""
        dm = await self._engine.find_or_create_dm(inbox_id)
        now = time.time_ns()
        if await self._store.write(conversations.accept_own, dm.id, Kind.DM, inbox_id, now):
            await self._engine.set_consent(
                conversation_id=dm.id, allowed=True, peer_inbox_id=inbox_id
            )
        return dm.id

    def _check_room(self) -> None:
        """A send writes to both databases: on a full disk, say so at once instead of
        letting libxmtp wait for a database connection it cannot open."""
        if free_bytes(self._store.path.parent) < MIN_FREE_BYTES:
            raise StateError(
                f"the disk holding {self._store.path.parent} is full: nothing can be sent "
                "until space is freed there (receive, ack of what fits, status and identity "
                "keep working)",
                reason="storage_full",
            )

    async def _referenced(self, c: Outgoing, reply_to: str | None) -> tuple[Outgoing, str | None]:
        """The content with its reaction's referenced sender filled in, and the
        sender of the message replied to: XMTP apps use them to place the reference.
        Unknown (the message is not in the inbox, e.g. this identity's own): this
        identity when the outbox sent it, else left empty."""
        if c.reaction is not None:
            sender = await self._sender_of(c.reaction.message_id)
            c = replace(c, reaction=replace(c.reaction, reference_inbox_id=sender or ""))
        return c, (await self._sender_of(reply_to) if reply_to is not None else None)

    async def _sender_of(self, message_id: str) -> str | None:
        sender = await self._store.read(inbox.sender_of, message_id)
        if sender is None and await self._store.read(by_message_id, message_id):
            sender = self._own_inbox_id
        return sender

    async def send(
        self, *, to: str, content: Outgoing, key: str, reply_to: str | None
    ) -> SendResult:
        """One logical message per key to a destination (cone.core.destinations).

        To an address, inbox id or contact: the DM, accepted by this act. To a
        conversation id: it must be accepted, as for Reply.
        """
        check_content(content)
        self._check_room()
        self._network.require_identity()
        content, reply_to_inbox_id = await self._referenced(content, reply_to)
        send = functools.partial(
            self._outbox.send,
            key=key,
            destination=to,
            record_unknown=self._record_unknown,
            message=content,
            reply_to=reply_to,
            reply_to_inbox_id=reply_to_inbox_id,
        )
        dm = self._destinations.known_dm(to)
        if dm is not None:
            # The DM the last send to `to` went to: no resolving, no libxmtp call; the
            # claim checks it is still accepted.
            try:
                return await send(conversation_id=dm, require_accepted=True)
            except (FailedPrecondition, NotFound) as err:
                if err.reason not in ("not_accepted", UNKNOWN_CONVERSATION):
                    raise
                self._destinations.forget_dm(to)  # resolved afresh below (which accepts it)
        found = await self._destinations.resolve(to)
        if found.conversation_id is not None:
            return await send(conversation_id=found.conversation_id, require_accepted=True)
        assert found.inbox_id is not None
        conversation_id = await self._open_dm(found.inbox_id)
        self._destinations.remember_dm(to, conversation_id)
        return await send(conversation_id=conversation_id, require_accepted=False)

    async def reply(
        self,
        *,
        conversation_id: str,
        key: str,
        content: Outgoing,
        ack_consumer: str = "",
        ack_message_ids: list[str] | None = None,
    ) -> SendResult:
        """One message into an accepted conversation, one per key; `ack_message_ids`
        are acknowledged for `ack_consumer` in the transaction that claims the key
        (both commit or neither; docs/methods.md, `reply`)."""
        check_content(content)
        content, _ = await self._referenced(content, None)
        self._check_room()
        self._network.require_identity()
        try:
            return await self._outbox.send(
                key=key,
                destination=conversation_id,
                conversation_id=conversation_id,
                require_accepted=True,
                record_unknown=self._record_unknown,
                message=content,
                reply_to=None,
                ack_consumer=validate.consumer(ack_consumer),
                ack_message_ids=ack_message_ids or [],
            )
        except NotFound as err:
            if err.reason != UNKNOWN_CONVERSATION:
                raise
            # Replying never creates or accepts a conversation: unknown is not accepted.
            raise FailedPrecondition(
                f"conversation {conversation_id} is not known to this inbox, so it is not "
                "accepted: reply only into conversations you have accepted",
                reason="not_accepted",
                field="conversationId",
            ) from None


__all__ = ["MIN_FREE_BYTES", "Sending"]
