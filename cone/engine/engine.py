"""The XMTP engine: cone's one adapter over libxmtp (xmtp-bindings).

Everything cone needs from XMTP goes through `Engine`: the identity, conversations
and their consent, libxmtp's local message database, sync, streams, DMs, sending.
libxmtp errors are translated here, once, into ConeErrors.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from xmtp_bindings import xmtpv3 as ffi

from cone.engine._client import open_client, wallet_address
from cone.engine._offload import Offload
from cone.engine._probe import is_v3_cutover, refuses_v3
from cone.engine.streams import Opener, StreamHandle, StreamHealth, SupervisedStream
from cone.errors import (
    V3_CUTOVER,
    ConeError,
    FailedPrecondition,
    RateLimited,
    StateError,
    Unavailable,
    node_error_text,
    one_line,
    storage_full,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

PAGE = 500
# Bounds on libxmtp calls: libxmtp retries failed node calls itself for about 6 s, so
# a call still running after these is stuck; it is reported as a failure and retried
# by the caller's own schedule instead of holding ingest or catch-up forever. Every
# libxmtp call goes through `Offload.run` (see _offload.py): none runs on the loop.
LOCAL_CALL_S = 30.0
NETWORK_CALL_S = 120.0
# What status waits for libxmtp's view of the inbox before reporting it unknown.
STATUS_CALL_S = 5.0
# At most one direct cutover probe this often for failing streams (publishes that
# fail always probe: they are rare and slow already).
PROBE_EVERY_S = 60.0
# Registering a new installation is a handful of node calls; against an unreachable
# node libxmtp gives up after about 2 s, this bounds a node that never answers.
REGISTER_S = 60.0

V3_CUTOVER_ADVICE = (
    "the XMTP node has cut over to XMTP's decentralized network (D14N) and refuses "
    "publishes and new subscriptions from V3 clients such as this cone (libxmtp 1.10); "
    "see docs/networks.md"
)


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
    text = one_line(str(exc))
    lowered = text.lower()
    if is_v3_cutover(text):
        # Final, not an outage: retrying cannot succeed until cone moves to D14N.
        return FailedPrecondition(f"{doing} failed: {V3_CUTOVER_ADVICE}", reason=V3_CUTOVER)
    if storage_full(text):
        return StateError(
            f"{doing} failed: the disk holding the state directory is full ({text}); "
            "free space there: reads keep working meanwhile",
            reason="storage_full",
        )
    if "rate limit" in lowered or "resource_exhausted" in lowered or "429" in lowered:
        return RateLimited(f"XMTP rate limit while {doing}: {text}")
    return Unavailable(f"{doing} failed: {node_error_text(text)}", reason=reason)


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


def consent_records(conversation_id: str, peer_inbox_id: str | None, state: Any) -> list[Any]:
    """libxmtp consent records setting `state` for a conversation and, for a DM, its peer."""
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
    return records


def _consent(state: Any) -> XmtpConsent:
    return XmtpConsent(state.value) if state is not None else XmtpConsent.UNKNOWN


class Engine:
    """An open libxmtp client for one identity."""

    def __init__(
        self,
        client: Any,
        wallet_key: bytes,
        offload: Offload,
        inbox_id: str,
        installation_id: str,
        api_url: str = "",
    ) -> None:
        self._client = client
        self._x = offload
        self.inbox_id = inbox_id
        self.installation_id = installation_id
        self.address: str = wallet_address(wallet_key)
        self.api_url = api_url
        self._streams: list[SupervisedStream] = []
        self._reconnecting: asyncio.Task[None] | None = None
        self._cutover = False
        self._probed_at = -PROBE_EVERY_S
        self._probes: set[asyncio.Task[bool]] = set()
        # Groups, conversation details, deletions, installations (cone/engine/groups.py,
        # which imports this module for `translate`).
        from cone.engine.groups import Groups

        self.groups = Groups(client, self.inbox_id, wallet_key, offload)

    @classmethod
    async def open(
        cls, *, api_url: str, db_path: str, db_key: bytes, wallet_key: bytes, new: bool
    ) -> Engine:
        """Open the client. With `new=False` a new installation is refused, not made,
        and nothing goes to the network: a registered identity opens offline."""
        offload = Offload()

        async def opened() -> tuple[Any, bool, str, str]:
            client = await open_client(
                api_url=api_url,
                db_path=db_path,
                db_key=db_key,
                wallet_key=wallet_key,
                register=new,
                allow_offline=not new,
            )
            registered = client.signature_request() is None
            return client, registered, client.inbox_id(), bytes(client.installation_id()).hex()

        try:
            client, registered, inbox_id, installation_id = await offload.run(
                opened, REGISTER_S, "opening the XMTP client"
            )
        except ffi.FfiError as exc:
            if "storage error" in str(exc).lower() and not storage_full(str(exc)):
                raise StateError(
                    f"libxmtp's database {db_path} cannot be opened ({exc}): it or its salt "
                    "file is damaged. Restore the identity from a backup (cone restore FILE "
                    "--home NEW_HOME) and start there",
                    reason="corrupt_database",
                ) from exc
            raise translate(exc, "opening the XMTP client") from exc
        if not new and not registered:
            raise FailedPrecondition(
                "libxmtp's database does not hold this identity's installation; refusing to "
                "register a new installation (XMTP allows 10 per inbox). Restore the database "
                "or start with a new state directory.",
                reason="installation_mismatch",
            )
        return cls(client, wallet_key, offload, inbox_id, installation_id, api_url)

    def _error(
        self, exc: BaseException, doing: str, reason: str = "network_unavailable"
    ) -> ConeError:
        """`translate`, noting the V3 cutover (logged once) for status."""
        err = translate(exc, doing, reason)
        if err.reason == V3_CUTOVER:
            self._saw_cutover()
        return err

    async def _publish_error(self, exc: BaseException, doing: str) -> ConeError:
        """The error for a failed publication: the V3 cutover when the node refuses
        this client. libxmtp 1.10 reports that refusal only as "Sync failed to wait
        for intent", so the node is asked directly (`_probe`)."""
        err = self._error(exc, doing)
        if isinstance(err, Unavailable) and (self._cutover or await self._probe()):
            return FailedPrecondition(f"{doing} failed: {V3_CUTOVER_ADVICE}", reason=V3_CUTOVER)
        return err

    async def _probe(self) -> bool:
        self._probed_at = time.monotonic()
        if await refuses_v3(self.api_url):
            self._saw_cutover()
        return self._cutover

    def _saw_cutover(self) -> None:
        if not self._cutover:
            self._cutover = True
            log.error(
                "the XMTP node at %s has cut over to XMTP's decentralized network (D14N) "
                "and refuses publishes and new subscriptions from this cone (libxmtp 1.10, "
                "an XMTP V3 client). Sends wait in the outbox and fail with reason "
                "v3_cutover; what the node holds can still be read. To send again, run this "
                "identity on a cone built on a libxmtp with D14N support, or point "
                "--network/--api-url at a node that still serves V3 (docs/networks.md).",
                self.api_url or "?",
            )

    def _stream_error(self, error: str) -> None:
        if is_v3_cutover(error):
            self._saw_cutover()
        elif not self._cutover and time.monotonic() - self._probed_at >= PROBE_EVERY_S:
            # A subscription refused after the cutover closes without the text.
            task = asyncio.get_running_loop().create_task(self._probe())
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)

    def v3_cutover(self) -> bool:
        """Whether the node has refused this client as a V3 client (a publication or
        a subscription) since the last publication it accepted."""
        return self._cutover

    # --- conversations and messages (local database) -------------------------

    def _info(self, conv: Any) -> ConversationInfo:
        # Runs on an offload worker: every accessor here may read libxmtp's database.
        is_group = conv.conversation_type() == ffi.FfiConversationType.GROUP
        peer = conv.dm_peer_inbox_id() if not is_group else conv.added_by_inbox_id()
        return ConversationInfo(
            id=bytes(conv.id()).hex(),
            is_group=is_group,
            peer_inbox_id=peer or "",
            consent=_consent(conv.consent_state()),
            active=conv.is_active(),
        )

    async def conversations(self) -> list[ConversationInfo]:
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

        def listed() -> list[ConversationInfo]:
            items = self._client.conversations().list(opts)
            return [self._info(item.conversation()) for item in items]

        try:
            return await self._x.run_sync(listed, LOCAL_CALL_S, "listing conversations")
        except ffi.FfiError as exc:
            raise translate(exc, "listing conversations") from exc

    async def conversation(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None when libxmtp does not know it."""
        try:
            key = bytes.fromhex(conversation_id)
        except ValueError:
            return None

        def found() -> ConversationInfo | None:
            try:
                conv = self._client.conversation(key)
            except ffi.FfiError:
                return None
            return self._info(conv)

        try:
            return await self._x.run_sync(found, LOCAL_CALL_S, "reading a conversation")
        except ffi.FfiError as exc:
            raise translate(exc, "reading a conversation") from exc

    def _find_page(self, key: bytes, opts: Any) -> Awaitable[list[Any]]:
        page: Awaitable[list[Any]] = self._client.conversation(key).find_messages(opts)
        return page

    async def messages_since(
        self, conversation_id: str, inserted_after_ns: int
    ) -> list[RawMessage]:
        """Messages libxmtp stored for a conversation with `inserted_at_ns` above the
        given value, each once, in libxmtp's insertion-stamp order.

        libxmtp 1.10's stamps are neither unique nor close to the clock (see
        docs/guarantees.md), so pages overlap by one stamp and are joined by id: a run
        of equal stamps across a page boundary is never cut.
        """
        key = bytes.fromhex(conversation_id)
        out: list[RawMessage] = []
        seen: set[bytes] = set()
        cursor, limit = inserted_after_ns, PAGE
        while True:
            opts = _list_options(limit=limit, inserted_after_ns=cursor)
            try:
                page = await self._x.run(
                    functools.partial(self._find_page, key, opts),
                    LOCAL_CALL_S,
                    "reading messages",
                )
            except ffi.FfiError as exc:
                raise translate(exc, "reading messages") from exc
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
        key = bytes.fromhex(conversation_id)
        opts = _list_options(limit=None, inserted_after_ns=None)

        def counted() -> int:
            return int(self._client.conversation(key).count_messages(opts))

        try:
            return await self._x.run_sync(counted, LOCAL_CALL_S, "counting messages")
        except ffi.FfiError as exc:
            raise translate(exc, "counting messages") from exc

    # --- network ----------------------------------------------------------------

    async def sync_all(self) -> None:
        """Welcomes, conversations, messages and consent; Unavailable when it fails."""
        try:
            await self._x.run(
                lambda: self._client.conversations().sync(), NETWORK_CALL_S, "syncing welcomes"
            )
            await self._x.run(
                lambda: self._client.conversations().sync_all_conversations(None),
                NETWORK_CALL_S,
                "syncing conversations",
            )
            await self._x.run(self._client.sync_preferences, NETWORK_CALL_S, "syncing consent")
        except ffi.FfiError as exc:
            err = self._error(exc, "syncing with the XMTP network", "sync_failed")
            # A sync is a sync failure whatever refused it (the cutover is in status).
            raise Unavailable(err.message, reason="sync_failed") from exc
        except Unavailable as exc:
            raise Unavailable(exc.message, reason="sync_failed") from exc

    async def sync_conversation(self, conversation_id: str) -> None:
        """Fetch one conversation's new messages into libxmtp's database."""
        key = bytes.fromhex(conversation_id)
        try:
            await self._x.run(
                lambda: self._client.conversation(key).sync(),
                NETWORK_CALL_S,
                "syncing a conversation",
            )
        except ffi.FfiError as exc:
            raise self._error(exc, "syncing a conversation") from exc

    async def resolve(self, identifier: str) -> str | None:
        """The inbox id for an address or inbox id, or None when it is not on XMTP.

        With the network down, an inbox id libxmtp already holds still resolves."""
        try:
            if identifier.startswith("0x"):
                ident = ffi.FfiIdentifier(
                    identifier=identifier.lower(), identifier_kind=ffi.FfiIdentifierKind.ETHEREUM
                )
                inbox: str | None = await self._x.run(
                    lambda: self._client.find_inbox_id(ident), NETWORK_CALL_S, "resolving"
                )
                return inbox
            states = await self._x.run(
                lambda: self._client.addresses_from_inbox_id(True, [identifier]),
                NETWORK_CALL_S,
                f"resolving {identifier}",
            )
        except ffi.FfiError as exc:
            if "not found" in str(exc).lower() or "missing" in str(exc).lower():
                return None
            err = self._error(exc, f"resolving {identifier}")
            if isinstance(err, Unavailable) and await self._held_locally(identifier):
                return identifier
            raise err from exc
        except Unavailable:
            if await self._held_locally(identifier):
                return identifier
            raise
        return identifier if states and states[0].installations else None

    async def _held_locally(self, inbox_id: str) -> bool:
        """Whether libxmtp's database holds an inbox with installations (no network)."""
        if inbox_id.startswith("0x"):
            return False
        try:
            states = await self._x.run(
                lambda: self._client.addresses_from_inbox_id(False, [inbox_id]),
                LOCAL_CALL_S,
                "reading an inbox",
            )
        except (ffi.FfiError, Unavailable):
            return False
        return bool(states and states[0].installations)

    async def addresses_of(self, inbox_id: str) -> list[str]:
        """The Ethereum addresses associated with an inbox ([] when unknown or unreachable)."""
        try:
            states = await self._x.run(
                lambda: self._client.addresses_from_inbox_id(False, [inbox_id]),
                LOCAL_CALL_S,
                "reading an inbox's addresses",
            )
        except (ffi.FfiError, Unavailable):
            return []
        return [i.identifier for s in states for i in s.account_identities]

    async def find_or_create_dm(self, inbox_id: str) -> ConversationInfo:
        """The DM with `inbox_id`, created (and published) if there is none."""

        async def dm() -> ConversationInfo:
            conv = await self._client.conversations().find_or_create_dm(
                inbox_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
            )
            return self._info(conv)

        try:
            return await self._x.run(dm, NETWORK_CALL_S, f"creating the DM with {inbox_id}")
        except ffi.FfiError as exc:
            raise await self._publish_error(exc, f"creating the DM with {inbox_id}") from exc

    async def set_consent(
        self, *, conversation_id: str, allowed: bool, peer_inbox_id: str | None = None
    ) -> None:
        """Record consent in XMTP (synced to this inbox's other installations)."""
        state = ffi.FfiConsentState.ALLOWED if allowed else ffi.FfiConsentState.DENIED
        records = consent_records(conversation_id, peer_inbox_id, state)
        try:
            await self._x.run(
                lambda: self._client.set_consent_states(records),
                LOCAL_CALL_S,
                "recording consent in XMTP",
            )
        except ffi.FfiError as exc:
            raise self._error(exc, "recording consent in XMTP") from exc

    async def inbox_consent(self, inbox_id: str) -> XmtpConsent:
        """XMTP's consent record for an inbox."""
        try:
            state = await self._x.run(
                lambda: self._client.get_consent_state(ffi.FfiConsentEntityType.INBOX_ID, inbox_id),
                LOCAL_CALL_S,
                "reading consent",
            )
        except ffi.FfiError:
            return XmtpConsent.UNKNOWN
        return _consent(state)

    async def budgets(self) -> tuple[int, int]:
        """(active installations, identity updates) of this inbox, from local state."""

        async def read() -> tuple[int, int]:
            state = await self._client.inbox_state(False)
            updates = await self._client.fetch_own_inbox_updates_count(False)
            return len(state.installations), int(updates)

        try:
            return await self._x.run(read, STATUS_CALL_S, "reading the inbox state")
        except ffi.FfiError as exc:
            raise self._error(exc, "reading the inbox state") from exc

    # --- sending (two-phase: prepare locally, then publish) ----------------------

    async def prepare(self, conversation_id: str, payload: bytes) -> str:
        """Store an outgoing message in libxmtp as unpublished; returns its id."""
        key = bytes.fromhex(conversation_id)

        def prepared() -> str:
            return bytes(self._client.conversation(key).prepare_message(payload, True)).hex()

        try:
            return await self._x.run_sync(prepared, LOCAL_CALL_S, "preparing a message")
        except ffi.FfiError as exc:
            raise self._error(exc, "preparing a message") from exc

    async def publish(self, conversation_id: str, message_id: str) -> None:
        """Publish a prepared message; harmless to repeat after success."""
        key, message = bytes.fromhex(conversation_id), bytes.fromhex(message_id)
        try:
            await self._x.run(
                lambda: self._client.conversation(key).publish_stored_message(message),
                NETWORK_CALL_S,
                "publishing a message",
            )
        except ffi.FfiError as exc:
            raise await self._publish_error(exc, "publishing a message") from exc
        self._cutover = False

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
        on_conversation: Callable[[str], None],
        on_consent: Callable[[list[ConsentUpdate]], None],
        on_restart: Callable[[], None],
    ) -> None:
        """Open the message, conversation and consent streams under supervision.

        The handlers run on the event loop with plain values (messages, conversation
        ids, consent updates): what libxmtp hands over is read on libxmtp's own thread.
        """

        def message(m: Any) -> RawMessage:
            return _raw(m, bytes(m.conversation_id).hex())

        def conversation(c: Any) -> str:
            return bytes(c.id()).hex()

        def consent(records: Any) -> list[ConsentUpdate]:
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
            return updates

        def opener(name: str, open_: Callable[[Any, Any], Awaitable[Any]]) -> Opener:
            async def ready(cb: Any) -> Any:
                closer = await open_(self._client.conversations(), cb)
                await closer.wait_for_ready()
                if closer.is_closed():
                    # libxmtp reports "ready" also for a subscription that failed.
                    raise ConnectionError("the subscription failed")
                return closer

            async def opened(cb: Any) -> StreamHandle:
                closer: Any = await self._x.run(
                    lambda: ready(cb), NETWORK_CALL_S, f"opening {name}"
                )
                return StreamHandle(
                    lambda: self._x.run_sync(closer.end, LOCAL_CALL_S, f"ending {name}")
                )

            return opened

        self._streams = [
            SupervisedStream(
                "messages",
                opener("the message stream", lambda c, cb: c.stream_all_messages(cb, None)),
                message,
                on_message,
                on_restart,
                self._stream_error,
            ),
            SupervisedStream(
                "conversations",
                opener("the conversation stream", lambda c, cb: c.stream(cb)),
                conversation,
                on_conversation,
                on_restart,
                self._stream_error,
            ),
            SupervisedStream(
                "consent",
                opener("the consent stream", lambda c, cb: c.stream_consent(cb)),
                consent,
                on_consent,
                on_restart,
                self._stream_error,
            ),
        ]
        await asyncio.gather(*(s.start() for s in self._streams))

    def reconnect_streams(self) -> None:
        """Reopen now every stream that is waiting out its backoff."""
        for s in self._streams:
            if not s.health.connected:
                s.retry_now()

    def stream_health(self) -> list[StreamHealth]:
        """Health of each stream, for status."""
        return [s.health for s in self._streams]

    def streams_connected(self) -> bool:
        """True while every stream is open."""
        return bool(self._streams) and all(s.health.connected for s in self._streams)

    async def release_db(self) -> None:
        """Let go of libxmtp's database (checkpointed) so its files can be copied."""
        try:
            await self._x.run_sync(
                self._client.release_db_connection, LOCAL_CALL_S, "releasing libxmtp's database"
            )
        except ffi.FfiError as exc:
            raise self._error(exc, "releasing libxmtp's database") from exc

    async def reconnect_db(self) -> None:
        """Reopen libxmtp's database after `release_db`; when that fails (a full disk),
        keep trying in the background, so libxmtp works again once it can."""
        try:
            await self._reconnect_once()
        except (ConeError, ffi.FfiError):
            if self._reconnecting is None or self._reconnecting.done():
                self._reconnecting = asyncio.create_task(self._reconnect_until_done())
            raise

    async def _reconnect_until_done(self) -> None:
        delay = 0.5
        while True:
            await asyncio.sleep(delay)
            try:
                await self._reconnect_once()
            except (ConeError, ffi.FfiError) as exc:
                log.warning("reopening libxmtp's database failed again: %s", exc)
                delay = min(delay * 2, 30.0)
            else:
                log.info("libxmtp's database is open again")
                return

    async def _reconnect_once(self) -> None:
        try:
            await self._x.run(
                self._client.db_reconnect, LOCAL_CALL_S, "reopening libxmtp's database"
            )
        except ffi.FfiError as exc:
            raise translate(exc, "reopening libxmtp's database") from exc

    async def close(self) -> None:
        """Stop the streams and release libxmtp's database."""
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            await asyncio.gather(self._reconnecting, return_exceptions=True)
        for task in list(self._probes):
            task.cancel()
        await asyncio.gather(*self._probes, return_exceptions=True)
        for s in self._streams:
            await s.stop()
        self._streams = []
        try:
            await self._x.run_sync(
                self._client.release_db_connection, LOCAL_CALL_S, "releasing libxmtp's database"
            )
        except (ffi.FfiError, Unavailable) as exc:
            log.warning("releasing libxmtp's database: %s", exc)


__all__ = [
    "ConsentUpdate",
    "ConversationInfo",
    "Engine",
    "RawMessage",
    "XmtpConsent",
]
