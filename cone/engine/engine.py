"""The XMTP engine: cone's one adapter over libxmtp (xmtp-bindings).

Everything cone needs from XMTP goes through `Engine`: the identity, conversations
and their consent, libxmtp's local message database, sync, streams, DMs, sending.
libxmtp errors are translated here, once, into ConeErrors.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from xmtp_bindings import xmtpv3 as ffi

from cone.engine._client import open_client, wallet_address
from cone.engine.streams import StreamHealth, SupervisedStream
from cone.errors import ConeError, FailedPrecondition, RateLimited, Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

PAGE = 500
# Bounds on libxmtp calls: libxmtp retries failed node calls itself for about 6 s, so
# a call still running after these is stuck; it is reported as a failure and retried
# by the caller's own schedule instead of holding ingest or catch-up forever.
LOCAL_CALL_S = 30.0
NETWORK_CALL_S = 120.0


async def _bounded(call: Awaitable[T], seconds: float, doing: str) -> T:
    try:
        return await asyncio.wait_for(call, seconds)
    except TimeoutError:
        raise Unavailable(f"{doing} did not finish in {seconds:.0f} s") from None


class XmtpConsent(Enum):
    """XMTP's own consent record for a conversation or inbox."""

    UNKNOWN = 0
    ALLOWED = 1
    DENIED = 2


@dataclass(frozen=True)
class ConversationInfo:
    """A conversation as libxmtp knows it."""

    id: str
    is_group: bool
    peer_inbox_id: str
    consent: XmtpConsent
    active: bool


@dataclass(frozen=True)
class RawMessage:
    """A message from libxmtp's database, not yet decoded."""

    id: str
    conversation_id: str
    sender_inbox_id: str
    sent_at_ns: int
    inserted_at_ns: int
    content: bytes
    application: bool
    published: bool


@dataclass(frozen=True)
class ConsentUpdate:
    """A consent change XMTP reported (from any installation of this inbox)."""

    conversation_id: str | None
    inbox_id: str | None
    consent: XmtpConsent


def translate(exc: BaseException, doing: str, reason: str = "network_unavailable") -> ConeError:
    """One place where libxmtp's errors become ConeErrors."""
    text = str(exc)
    lowered = text.lower()
    if "rate limit" in lowered or "resource_exhausted" in lowered or "429" in lowered:
        return RateLimited(f"XMTP rate limit while {doing}: {text}")
    return Unavailable(f"{doing} failed: {text}", reason=reason)


def _list_options(*, limit: int | None, inserted_after_ns: int | None) -> Any:
    return ffi.FfiListMessagesOptions(
        sent_before_ns=None,
        sent_after_ns=None,
        limit=limit,
        delivery_status=None,
        direction=ffi.FfiDirection.ASCENDING,
        content_types=None,
        exclude_content_types=None,
        exclude_sender_inbox_ids=None,
        sort_by=ffi.FfiSortBy.INSERTED_AT,
        inserted_after_ns=inserted_after_ns,
        inserted_before_ns=None,
    )


def _raw(m: Any, conversation_id: str) -> RawMessage:
    return RawMessage(
        id=bytes(m.id).hex(),
        conversation_id=conversation_id,
        sender_inbox_id=m.sender_inbox_id,
        sent_at_ns=m.sent_at_ns,
        inserted_at_ns=m.inserted_at_ns,
        content=bytes(m.content),
        application=m.kind == ffi.FfiConversationMessageKind.APPLICATION,
        published=m.delivery_status == ffi.FfiDeliveryStatus.PUBLISHED,
    )


def _consent(state: Any) -> XmtpConsent:
    return XmtpConsent(state.value) if state is not None else XmtpConsent.UNKNOWN


class Engine:
    """An open libxmtp client for one identity."""

    def __init__(self, client: Any, wallet_key: bytes) -> None:
        self._client = client
        self.inbox_id: str = client.inbox_id()
        self.installation_id: str = bytes(client.installation_id()).hex()
        self.address: str = wallet_address(wallet_key)
        self._streams: list[SupervisedStream] = []
        # Groups, conversation details, deletions, installations (cone/engine/groups.py,
        # which imports this module for `translate`).
        from cone.engine.groups import Groups

        self.groups = Groups(client, self.inbox_id, wallet_key)

    @classmethod
    async def open(
        cls, *, api_url: str, db_path: str, db_key: bytes, wallet_key: bytes, new: bool
    ) -> Engine:
        """Open the client. With `new=False` a new installation is refused, not made."""
        try:
            client = await open_client(
                api_url=api_url, db_path=db_path, db_key=db_key, wallet_key=wallet_key, register=new
            )
        except ffi.FfiError as exc:
            raise translate(exc, "opening the XMTP client") from exc
        if not new and client.signature_request() is not None:
            raise FailedPrecondition(
                "libxmtp's database does not hold this identity's installation; refusing to "
                "register a new installation (XMTP allows 10 per inbox). Restore the database "
                "or start with a new state directory.",
                reason="installation_mismatch",
            )
        return cls(client, wallet_key)

    # --- conversations and messages (local database) -------------------------

    def _info(self, conv: Any) -> ConversationInfo:
        is_group = conv.conversation_type() == ffi.FfiConversationType.GROUP
        peer = conv.dm_peer_inbox_id() if not is_group else conv.added_by_inbox_id()
        return ConversationInfo(
            id=bytes(conv.id()).hex(),
            is_group=is_group,
            peer_inbox_id=peer or "",
            consent=_consent(conv.consent_state()),
            active=conv.is_active(),
        )

    def conversations(self) -> list[ConversationInfo]:
        """Every DM and group in libxmtp's database (the device-sync group excluded)."""
        opts = ffi.FfiListConversationsOptions(
            created_after_ns=None,
            created_before_ns=None,
            last_activity_before_ns=None,
            last_activity_after_ns=None,
            order_by=None,
            limit=None,
            consent_states=None,
            include_duplicate_dms=False,
        )
        return [self._info(item.conversation()) for item in self._client.conversations().list(opts)]

    def conversation(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None when libxmtp does not know it."""
        try:
            conv = self._client.conversation(bytes.fromhex(conversation_id))
        except (ffi.FfiError, ValueError):
            return None
        return self._info(conv)

    async def messages_since(
        self, conversation_id: str, inserted_after_ns: int
    ) -> list[RawMessage]:
        """Messages libxmtp stored for a conversation with `inserted_at_ns` above the
        given value, each once, in libxmtp's insertion-stamp order.

        libxmtp 1.10's stamps are neither unique nor close to the clock (see
        docs/guarantees.md), so pages overlap by one stamp and are joined by id: a run
        of equal stamps across a page boundary is never cut.
        """
        conv = self._client.conversation(bytes.fromhex(conversation_id))
        out: list[RawMessage] = []
        seen: set[bytes] = set()
        cursor, limit = inserted_after_ns, PAGE
        while True:
            opts = _list_options(limit=limit, inserted_after_ns=cursor)
            page = await _bounded(conv.find_messages(opts), LOCAL_CALL_S, "reading messages")
            for m in page:
                mid = bytes(m.id)
                if mid not in seen:
                    seen.add(mid)
                    out.append(_raw(m, conversation_id))
            if len(page) < limit:
                return out
            top = page[-1].inserted_at_ns - 1
            if top <= cursor:
                limit *= 2  # a whole page of one stamp: widen the page, never skip
            else:
                cursor, limit = top, PAGE

    async def message_count(self, conversation_id: str) -> int:
        """How many messages libxmtp holds for a conversation (every kind and sender)."""
        conv = self._client.conversation(bytes.fromhex(conversation_id))
        opts = _list_options(limit=None, inserted_after_ns=None)
        count = asyncio.to_thread(conv.count_messages, opts)  # a blocking call in libxmtp
        return int(await _bounded(count, LOCAL_CALL_S, "counting messages"))

    async def sync_all(self) -> None:
        """Welcomes, conversations, messages and consent; Unavailable when it fails."""
        try:
            convs = self._client.conversations()
            await _bounded(convs.sync(), NETWORK_CALL_S, "syncing welcomes")
            await _bounded(
                convs.sync_all_conversations(None), NETWORK_CALL_S, "syncing conversations"
            )
            await _bounded(self._client.sync_preferences(), NETWORK_CALL_S, "syncing consent")
        except ffi.FfiError as exc:
            raise translate(exc, "syncing with the XMTP network", "sync_failed") from exc
        except Unavailable as exc:
            raise Unavailable(exc.message, reason="sync_failed") from exc

    async def sync_conversation(self, conversation_id: str) -> None:
        """Fetch one conversation's new messages into libxmtp's database."""
        try:
            conv = self._client.conversation(bytes.fromhex(conversation_id))
            await _bounded(conv.sync(), NETWORK_CALL_S, "syncing a conversation")
        except ffi.FfiError as exc:
            raise translate(exc, "syncing a conversation") from exc

    async def resolve(self, identifier: str) -> str | None:
        """The inbox id for an address or inbox id, or None when it is not on XMTP."""
        try:
            if identifier.startswith("0x"):
                ident = ffi.FfiIdentifier(
                    identifier=identifier.lower(), identifier_kind=ffi.FfiIdentifierKind.ETHEREUM
                )
                inbox: str | None = await self._client.find_inbox_id(ident)
                return inbox
            states = await self._client.addresses_from_inbox_id(True, [identifier])
        except ffi.FfiError as exc:
            if "not found" in str(exc).lower() or "missing" in str(exc).lower():
                return None
            raise translate(exc, f"resolving {identifier}") from exc
        return identifier if states and states[0].installations else None

    async def addresses_of(self, inbox_id: str) -> list[str]:
        """The Ethereum addresses associated with an inbox."""
        try:
            states = await self._client.addresses_from_inbox_id(False, [inbox_id])
        except ffi.FfiError:
            return []
        return [i.identifier for s in states for i in s.account_identities]

    async def find_or_create_dm(self, inbox_id: str) -> ConversationInfo:
        """The DM with `inbox_id`, created (and published) if there is none."""
        try:
            conv = await self._client.conversations().find_or_create_dm(
                inbox_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
            )
        except ffi.FfiError as exc:
            raise translate(exc, f"creating the DM with {inbox_id}") from exc
        return self._info(conv)

    async def set_consent(
        self, *, conversation_id: str, allowed: bool, peer_inbox_id: str | None = None
    ) -> None:
        """Record consent in XMTP (synced to this inbox's other installations)."""
        state = ffi.FfiConsentState.ALLOWED if allowed else ffi.FfiConsentState.DENIED
        records = [
            ffi.FfiConsent(
                entity_type=ffi.FfiConsentEntityType.CONVERSATION_ID,
                state=state,
                entity=conversation_id,
            )
        ]
        if peer_inbox_id:
            records.append(
                ffi.FfiConsent(
                    entity_type=ffi.FfiConsentEntityType.INBOX_ID, state=state, entity=peer_inbox_id
                )
            )
        try:
            await self._client.set_consent_states(records)
        except ffi.FfiError as exc:
            raise translate(exc, "recording consent in XMTP") from exc

    async def inbox_consent(self, inbox_id: str) -> XmtpConsent:
        """XMTP's consent record for an inbox."""
        try:
            state = await self._client.get_consent_state(
                ffi.FfiConsentEntityType.INBOX_ID, inbox_id
            )
        except ffi.FfiError:
            return XmtpConsent.UNKNOWN
        return _consent(state)

    async def budgets(self) -> tuple[int, int]:
        """(active installations, identity updates) of this inbox, from local state."""
        try:
            state = await self._client.inbox_state(False)
            updates = await self._client.fetch_own_inbox_updates_count(False)
        except ffi.FfiError as exc:
            raise translate(exc, "reading the inbox state") from exc
        return len(state.installations), int(updates)

    # --- sending (two-phase: prepare locally, then publish) ----------------------

    def prepare(self, conversation_id: str, payload: bytes) -> str:
        """Store an outgoing message in libxmtp as unpublished; returns its id."""
        try:
            conv = self._client.conversation(bytes.fromhex(conversation_id))
            return bytes(conv.prepare_message(payload, True)).hex()
        except ffi.FfiError as exc:
            raise translate(exc, "preparing a message") from exc

    async def publish(self, conversation_id: str, message_id: str) -> None:
        """Publish a prepared message; harmless to repeat after success."""
        try:
            conv = self._client.conversation(bytes.fromhex(conversation_id))
            await _bounded(
                conv.publish_stored_message(bytes.fromhex(message_id)),
                NETWORK_CALL_S,
                "publishing a message",
            )
        except ffi.FfiError as exc:
            raise translate(exc, "publishing a message") from exc

    async def own_messages(self, conversation_id: str, inserted_after_ns: int) -> list[RawMessage]:
        """This identity's messages in a conversation (to find a prepared one by key)."""
        return [
            m
            for m in await self.messages_since(conversation_id, inserted_after_ns)
            if m.sender_inbox_id == self.inbox_id and m.application
        ]

    # --- streams ----------------------------------------------------------------

    async def start_streams(
        self,
        *,
        on_message: Callable[[RawMessage], None],
        on_conversation: Callable[[ConversationInfo], None],
        on_consent: Callable[[list[ConsentUpdate]], None],
        on_restart: Callable[[], None],
    ) -> None:
        """Open the message, conversation and consent streams under supervision."""
        convs = self._client.conversations()

        def message(m: Any) -> None:
            on_message(_raw(m, bytes(m.conversation_id).hex()))

        def conversation(c: Any) -> None:
            on_conversation(self._info(c))

        def consent(records: Any) -> None:
            updates = []
            for r in records:
                is_conv = r.entity_type == ffi.FfiConsentEntityType.CONVERSATION_ID
                updates.append(
                    ConsentUpdate(
                        conversation_id=r.entity if is_conv else None,
                        inbox_id=None if is_conv else r.entity,
                        consent=_consent(r.state),
                    )
                )
            on_consent(updates)

        self._streams = [
            SupervisedStream(
                "messages", lambda cb: convs.stream_all_messages(cb, None), message, on_restart
            ),
            SupervisedStream("conversations", convs.stream, conversation, on_restart),
            SupervisedStream("consent", convs.stream_consent, consent, on_restart),
        ]
        await asyncio.gather(*(s.start() for s in self._streams))

    def stream_health(self) -> list[StreamHealth]:
        """Health of each stream, for status."""
        return [s.health for s in self._streams]

    def streams_connected(self) -> bool:
        """True while every stream is open."""
        return bool(self._streams) and all(s.health.connected for s in self._streams)

    async def release_db(self) -> None:
        """Let go of libxmtp's database (checkpointed) so its files can be copied."""
        try:
            self._client.release_db_connection()
        except ffi.FfiError as exc:
            raise translate(exc, "releasing libxmtp's database") from exc

    async def reconnect_db(self) -> None:
        """Reopen libxmtp's database after `release_db`."""
        try:
            await self._client.db_reconnect()
        except ffi.FfiError as exc:
            raise translate(exc, "reopening libxmtp's database") from exc

    async def close(self) -> None:
        """Stop the streams and release libxmtp's database."""
        for s in self._streams:
            await s.stop()
        self._streams = []
        try:
            self._client.release_db_connection()
        except ffi.FfiError as exc:
            log.warning("releasing libxmtp's database: %s", exc)


__all__ = [
    "ConsentUpdate",
    "ConversationInfo",
    "Engine",
    "RawMessage",
    "XmtpConsent",
]
