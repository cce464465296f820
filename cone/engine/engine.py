"""The XMTP engine: cone's one adapter over libxmtp (xmtp-bindings).

Everything cone needs from XMTP goes through `Engine`: the identity, conversations
and their consent, libxmtp's local message database, sync, streams, DMs, sending.
libxmtp errors are translated here, once, into ConeErrors.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from xmtp_bindings import xmtpv3 as ffi

from cone import _failpoints, _malloc
from cone.engine import _convert, deletions
from cone.engine._calls import LOCAL_CALL_S, NETWORK_CALL_S, Calls, answered
from cone.engine._client import open_client, wallet_address
from cone.engine._cutover import Cutover
from cone.engine._echoes import Echoes
from cone.engine._errors import detail, is_absent, is_damaged_database
from cone.engine._offload import Offload
from cone.engine._subscriptions import supervised_streams
from cone.engine.consent import Consent
from cone.engine.groups import Groups
from cone.engine.installations import Installations
from cone.engine.port import (
    ConsentUpdate,
    ConversationInfo,
    RawMessage,
    StreamHealth,
    SyncSummary,
    XmtpConsent,
)
from cone.engine.streams import SupervisedStream
from cone.errors import ConeError, FailedPrecondition, StateError, Unavailable

log = logging.getLogger(__name__)

PAGE: Final = 500
# What each conversation adds to the listing's time bound: the listing took 9.4 s
# for 10,000 conversations at load 10 on 2 cores (docs/bench.md, "big store"), about
# 1 ms each; three times that.
LIST_S_PER_CONVERSATION: Final = 0.003
# What status waits for libxmtp's view of the inbox before reporting it unknown.
STATUS_CALL_S: Final = 5.0
# Registering a new installation is a handful of node calls; against an unreachable
# node libxmtp gives up after about 2 s, this bounds a node that never answers.
REGISTER_S: Final = 60.0


class Engine:
    """An open libxmtp client for one identity (implements `port.EnginePort`)."""

    def __init__(
        self,
        client: Any,
        wallet_key: bytes,
        offload: Offload,
        inbox_id: str,
        installation_id: str,
        api_url: str = "",
        gateway_url: str | None = None,
    ) -> None:
        self._client = client
        self._wallet_key = wallet_key
        self._cut = Cutover(api_url, on_d14n=gateway_url is not None)
        self._x = Calls(offload, noted=self._cut.noted)
        self.inbox_id = inbox_id
        self.installation_id = installation_id
        self.address: str = wallet_address(wallet_key)
        self.api_url = api_url
        self.gateway_url = gateway_url
        self._streams: list[SupervisedStream] = []
        self._listed = 0  # conversations in the last listing (scales its bound)
        self._reconnecting: asyncio.Task[None] | None = None
        self._handlers: dict[str, Any] = {}
        # This engine's sends, whose stream echoes are dropped (cone/engine/_echoes.py).
        self._echoes = Echoes(inbox_id)
        self._attach(client)

    def _attach(self, client: Any) -> None:
        self._client = client
        self.groups = Groups(client, self.inbox_id, self._x)
        self.installations = Installations(client, self._wallet_key, self._x)
        self._consent = Consent(client, self._x)

    @classmethod
    async def open(
        cls, *, api_url: str, db_path: str, db_key: bytes, wallet_key: bytes, new: bool,
        gateway_url: str | None = None, cutover_gateway: str | None = None,
    ) -> Engine:  # fmt: skip
        """Open the client. With `new=False` a new installation is refused, not made,
        and nothing goes to the network: a registered identity opens offline. With
        `gateway_url`, libxmtp runs on D14N through that gateway. With
        `cutover_gateway`, a client on V3 moves itself to D14N through that gateway
        when its node cuts over (`on_switch`)."""
        offload = Offload()

        async def reopen(gateway: str) -> Any:
            return await open_client(
                api_url=api_url,
                gateway_url=gateway,
                db_path=db_path,
                db_key=db_key,
                wallet_key=wallet_key,
                register=False,
                allow_offline=True,
            )

        async def opened() -> tuple[Any, bool, str, str]:
            client = await open_client(
                api_url=api_url,
                gateway_url=gateway_url,
                db_path=db_path,
                db_key=db_key,
                wallet_key=wallet_key,
                register=new,
                allow_offline=not new,
            )
            registered = client.signature_request() is None
            return client, registered, client.inbox_id(), bytes(client.installation_id()).hex()

        try:
            client, registered, inbox_id, installation_id = await Calls(offload).call(
                opened, REGISTER_S, "opening the XMTP client"
            )
        except ConeError as err:
            offload.close()
            cause = err.__cause__
            if cause is not None and is_damaged_database(cause):
                raise StateError(
                    f"libxmtp's database {db_path} cannot be opened ({detail(str(cause))}): it "
                    "or its salt file is damaged. Restore the identity from a backup (cone "
                    "restore FILE --home NEW_HOME) and start there",
                    reason="corrupt_database",
                ) from cause
            raise
        if not new and not registered:
            offload.close()
            raise FailedPrecondition(
                "libxmtp's database does not hold this identity's installation; refusing to "
                "register a new installation (XMTP allows 10 per inbox). Restore the database "
                "or start with a new state directory.",
                reason="installation_mismatch",
            )
        engine = cls(client, wallet_key, offload, inbox_id, installation_id, api_url, gateway_url)
        if cutover_gateway and not gateway_url:
            move = functools.partial(engine._move_to_d14n, cutover_gateway, reopen)
            engine._cut.can_move(cutover_gateway, move)
        return engine

    # --- the V3 cutover (cone/engine/_cutover.py) -----------------------------------

    @property
    def backend(self) -> str:
        """`d14n` when libxmtp runs on XMTP's decentralized network, else `v3`."""
        return "d14n" if self._cut.on_d14n else "v3"

    def on_switch(self, handler: Callable[[], Awaitable[None]]) -> None:
        """Have `handler` run once libxmtp has moved to D14N at the cutover."""
        self._cut.on_moved(handler)

    def v3_cutover(self) -> bool:
        """Whether the node has refused this client as a V3 client (a publication or
        a subscription) since the last publication it accepted."""
        return self._cut.refused

    async def _move_to_d14n(self, gateway: str, reopen: Callable[[str], Awaitable[Any]]) -> None:
        """Move libxmtp to D14N over the same database: open the D14N client, stop
        the V3 streams, swap the clients, reopen the streams, let the V3 client go;
        then the core is told (`on_switch`): it records the move, catches up and
        publishes what waits. Until the D14N client is open nothing changes: a
        failure leaves the V3 client in the v3_cutover state and is tried again."""
        client = await self._x.call(
            lambda: reopen(gateway), REGISTER_S, "reopening the XMTP client on D14N"
        )
        same = await self._x.call_sync(
            lambda: (
                client.signature_request() is None
                and client.inbox_id() == self.inbox_id
                and bytes(client.installation_id()).hex() == self.installation_id
            ),
            LOCAL_CALL_S,
            "checking the D14N client",
        )
        if not same:
            raise StateError(
                "libxmtp opened another installation on D14N than this identity's",
                reason="installation_mismatch",
            )
        await _failpoints.reached("d14n_opened")  # a kill -9 here: the next start moves
        old = self._client
        for stream in self._streams:
            await stream.stop()
        self._attach(client)
        self.gateway_url = gateway
        self._cut.on_d14n = True
        if self._handlers:
            await self.start_streams(**self._handlers)
        try:
            await self._x.call_sync(
                old.release_db_connection, LOCAL_CALL_S, "releasing the V3 client's database"
            )
        except ConeError as exc:
            log.warning("releasing the V3 client's database: %s", exc)

    # --- conversations and messages (local database) -------------------------

    async def conversations(self, expected: int = 0) -> list[ConversationInfo]:
        """Every DM and group in libxmtp's database (the device-sync group excluded),
        each with the id of the newest message the listing shows.

        One libxmtp query whose time grows with the store: its bound is
        `LOCAL_CALL_S` plus `LIST_S_PER_CONVERSATION` for each conversation expected
        (the caller's count, or the last listing's, whichever is larger)."""

        def listed() -> list[ConversationInfo]:
            items = self._client.conversations().list(_convert.every_conversation())
            found = [_convert.listed(item) for item in items]
            del items  # libxmtp's objects, freed before the trim
            # The listing allocates tens of MiB at 10,000 conversations: give the
            # freed part back now (cone/_malloc.py).
            _malloc.trim()
            return found

        self._listed = max(self._listed, expected)
        bound = LOCAL_CALL_S + LIST_S_PER_CONVERSATION * self._listed
        found = await self._x.call_sync(listed, bound, "listing conversations")
        self._listed = len(found)
        return found

    async def conversation(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None when libxmtp does not know it."""

        def found() -> ConversationInfo | None:
            conv = _convert.find(self._client, conversation_id)
            return _convert.info(conv) if conv is not None else None

        return await self._x.call_sync(found, LOCAL_CALL_S, "reading a conversation")

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
            opts = _convert.messages_after(limit=limit, inserted_after_ns=cursor)
            page = await self._x.call(
                functools.partial(self._find_page, key, opts), LOCAL_CALL_S, "reading messages"
            )
            for m in page:
                mid = bytes(m.id)
                if mid not in seen:
                    seen.add(mid)
                    out.append(_convert.raw(m, conversation_id))
            if len(page) < limit:
                return out
            top = page[-1].inserted_at_ns - 1
            if top <= cursor:
                limit *= 2  # a whole page of one stamp: widen the page, never skip
            else:
                cursor, limit = top, PAGE

    async def message_pages(
        self, conversation_id: str, inserted_after_ns: int
    ) -> AsyncIterator[list[RawMessage]]:
        """`messages_since`, a page at a time (about `PAGE` messages): what a whole
        conversation's history is read with, never all of it in memory at once.

        Pages overlap by one stamp as in `messages_since`; only the ids at the page's
        last stamp are remembered across pages, to join the overlap by id.
        """
        key = bytes.fromhex(conversation_id)
        cursor, limit = inserted_after_ns, PAGE
        boundary: set[bytes] = set()
        while True:
            opts = _convert.messages_after(limit=limit, inserted_after_ns=cursor)
            page = await self._x.call(
                functools.partial(self._find_page, key, opts), LOCAL_CALL_S, "reading messages"
            )
            if len(page) < limit:
                yield [
                    _convert.raw(m, conversation_id) for m in page if bytes(m.id) not in boundary
                ]
                return
            top = page[-1].inserted_at_ns - 1
            if top <= cursor:
                limit *= 2  # a whole page of one stamp: widen the page, never skip
                continue
            yield [_convert.raw(m, conversation_id) for m in page if bytes(m.id) not in boundary]
            boundary = {bytes(m.id) for m in page if m.inserted_at_ns > top}
            cursor, limit = top, PAGE

    async def message_count(self, conversation_id: str) -> int:
        """How many messages libxmtp holds for a conversation (every kind and sender)."""
        key = bytes.fromhex(conversation_id)
        opts = _convert.messages_after(limit=None, inserted_after_ns=None)

        def counted() -> int:
            return int(self._client.conversation(key).count_messages(opts))

        return await self._x.call_sync(counted, LOCAL_CALL_S, "counting messages")

    async def own_messages(self, conversation_id: str, inserted_after_ns: int) -> list[RawMessage]:
        """This identity's messages in a conversation (to find a prepared one by key)."""
        return [
            m
            for m in await self.messages_since(conversation_id, inserted_after_ns)
            if m.sender_inbox_id == self.inbox_id and m.application
        ]

    #: The message id a peer's deleteMessage content names (cone/engine/deletions.py).
    deleted_message_id = staticmethod(deletions.deleted_message_id)

    # --- network ----------------------------------------------------------------

    async def sync_all(self) -> SyncSummary | None:
        """Welcomes, conversations, messages and consent, and what the conversations'
        sync did (`SyncSummary`; None when libxmtp's answer is not one); Unavailable
        when it fails.

        `sync_all_conversations` takes in the welcomes first (a separate welcome sync
        before it processed a burst's welcomes twice over). It runs on a worker thread
        of its own, not on the lane: taking in hundreds of welcomes is minutes of
        libxmtp's work done inside the polls of that one call, and on the lane every
        other asynchronous call (ingest's reads of new conversations) waited behind it."""
        conversations = self._client.conversations
        try:
            done = await self._x.call_sync(
                # An async call on a worker's own loop (the offload awaits it there).
                lambda: conversations().sync_all_conversations(None),
                NETWORK_CALL_S,
                "syncing welcomes and conversations",
            )
            await self._x.call(self._client.sync_preferences, NETWORK_CALL_S, "syncing consent")
        except ConeError as err:
            # A sync is a sync failure whatever refused it (the cutover is in status).
            raise Unavailable(err.message, reason="sync_failed") from err.__cause__
        # Syncing every group allocates in libxmtp's threads: give back what it freed
        # (cone/_malloc.py); the sync is done whether or not this finishes in time.
        with contextlib.suppress(ConeError):
            await self._x.call_sync(_malloc.trim, LOCAL_CALL_S, "returning freed memory")
        if not isinstance(done, ffi.FfiGroupSyncSummary):
            return None
        return SyncSummary(eligible=int(done.num_eligible), synced=int(done.num_synced))

    async def sync_conversation(self, conversation_id: str) -> None:
        """Fetch one conversation's new messages into libxmtp's database."""
        key = bytes.fromhex(conversation_id)
        await self._x.call(
            lambda: self._client.conversation(key).sync(),
            NETWORK_CALL_S,
            "syncing a conversation",
        )

    async def resolve(self, identifier: str) -> str | None:
        """The inbox id for an address or inbox id, or None when it is not on XMTP.

        With the network down, an inbox id libxmtp already holds still resolves."""
        try:
            if identifier.startswith("0x"):
                ident = ffi.FfiIdentifier(
                    identifier=identifier.lower(), identifier_kind=ffi.FfiIdentifierKind.ETHEREUM
                )
                inbox: str | None = await self._x.call(
                    lambda: self._client.find_inbox_id(ident), NETWORK_CALL_S, "resolving"
                )
                return inbox
            states = await self._x.call(
                lambda: self._client.addresses_from_inbox_id(True, [identifier]),
                NETWORK_CALL_S,
                f"resolving {identifier}",
            )
        except ConeError as err:
            if answered(err) and is_absent(err.__cause__):
                return None
            if isinstance(err, Unavailable) and await self._held_locally(identifier):
                return identifier
            raise
        return identifier if states and states[0].installations else None

    async def _local_inboxes(self, inbox_id: str, doing: str) -> list[Any]:
        """libxmtp's local record of an inbox ([] when it has none or cannot read it)."""
        try:
            states: list[Any] = await self._x.call(
                lambda: self._client.addresses_from_inbox_id(False, [inbox_id]),
                LOCAL_CALL_S,
                doing,
            )
        except ConeError:
            return []
        return states

    async def _held_locally(self, inbox_id: str) -> bool:
        """Whether libxmtp's database holds an inbox with installations (no network)."""
        if inbox_id.startswith("0x"):
            return False
        states = await self._local_inboxes(inbox_id, "reading an inbox")
        return bool(states and states[0].installations)

    async def addresses_of(self, inbox_id: str) -> list[str]:
        """The Ethereum addresses associated with an inbox ([] when unknown or unreachable)."""
        states = await self._local_inboxes(inbox_id, "reading an inbox's addresses")
        return [i.identifier for s in states for i in s.account_identities]

    async def find_or_create_dm(self, inbox_id: str) -> ConversationInfo:
        """The DM with `inbox_id`, created (and published) if there is none."""
        doing = f"creating the DM with {inbox_id}"

        async def dm() -> ConversationInfo:
            conv = await self._client.conversations().find_or_create_dm(
                inbox_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
            )
            return _convert.info(conv)

        try:
            return await self._x.call(dm, NETWORK_CALL_S, doing)
        except Unavailable as err:
            raise await self._cut.unless_refused(err, doing) from err.__cause__

    async def budgets(self) -> tuple[int, int]:
        """(active installations, identity updates) of this inbox, from local state."""

        async def read() -> tuple[int, int]:
            state = await self._client.inbox_state(False)
            updates = await self._client.fetch_own_inbox_updates_count(False)
            return len(state.installations), int(updates)

        return await self._x.call(read, STATUS_CALL_S, "reading the inbox state")

    # --- consent (cone/engine/consent.py) ------------------------------------------

    async def set_consent(
        self, *, conversation_id: str, allowed: bool, peer_inbox_id: str | None = None
    ) -> None:
        """Record consent in XMTP (synced to this inbox's other installations)."""
        await self._consent.set(conversation_id, peer_inbox_id, allowed)

    async def reset_consent(self, *, conversation_id: str, peer_inbox_id: str | None) -> None:
        """Set XMTP's consent records for a conversation (and a DM's peer) back to unknown."""
        await self._consent.reset(conversation_id, peer_inbox_id)

    async def inbox_consent(self, inbox_id: str) -> XmtpConsent:
        """XMTP's consent record for an inbox."""
        return await self._consent.of_inbox(inbox_id)

    # --- sending (two-phase: prepare locally, then publish) ----------------------

    async def prepare(self, conversation_id: str, payload: bytes) -> str:
        """Store an outgoing message in libxmtp as unpublished; returns its id."""
        key = bytes.fromhex(conversation_id)

        def prepared() -> str:
            return bytes(self._client.conversation(key).prepare_message(payload, True)).hex()

        return await self._x.call_sync(prepared, LOCAL_CALL_S, "preparing a message")

    async def send(
        self, conversation_id: str, payload: bytes, prepared: Callable[[str], None]
    ) -> str:
        """Prepare and publish a new message in one call into libxmtp (one worker
        hop, not two); returns its id. `prepared` is told the id on libxmtp's worker
        thread as soon as the message is stored, before its publication, so a caller
        whose publication fails or overruns still knows it: keep it to recording
        the id. A failure raises as `prepare`'s or `publish`'s would.

        The message stream's echo of the message is dropped on libxmtp's thread and
        never reaches `on_message`: the caller accounts for its own send."""
        key = bytes.fromhex(conversation_id)
        ids: list[str] = []

        async def sent() -> str:
            conversation = self._client.conversation(key)
            message = conversation.prepare_message(payload, True)
            message_id = bytes(message).hex()
            ids.append(message_id)
            self._echoes.add(bytes(message))
            prepared(message_id)
            await conversation.publish_stored_message(message)
            return message_id

        try:
            message_id: str = await self._x.offload.run(sent, NETWORK_CALL_S, "sending a message")
        except ffi.FfiError as exc:
            if not ids:
                raise self._x.error(exc, "preparing a message") from exc
            err = self._x.error(exc, "publishing a message")
            err.__cause__ = exc
            if isinstance(err, Unavailable):
                err = await self._cut.unless_refused(err, "publishing a message")
            raise err from exc
        self._cut.accepted()
        return message_id

    async def publish(self, conversation_id: str, message_id: str) -> None:
        """Publish a prepared message; harmless to repeat after success."""
        key, message = bytes.fromhex(conversation_id), bytes.fromhex(message_id)
        doing = "publishing a message"
        try:
            await self._x.call(
                lambda: self._client.conversation(key).publish_stored_message(message),
                NETWORK_CALL_S,
                doing,
            )
        except Unavailable as err:
            raise await self._cut.unless_refused(err, doing) from err.__cause__
        self._cut.accepted()

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
        They are kept: the streams reopen with them on D14N at the cutover.
        """
        self._handlers = {
            "on_message": on_message,
            "on_conversation": on_conversation,
            "on_consent": on_consent,
            "on_restart": on_restart,
        }
        self._cut.watch()
        self._streams = supervised_streams(
            lambda: self._client,
            self._x,
            on_message=on_message,
            on_conversation=on_conversation,
            on_consent=on_consent,
            on_restart=on_restart,
            on_error=self._cut.stream_error,
            echoes=self._echoes,
        )
        await asyncio.gather(*(s.start() for s in self._streams))

    def reconnect_streams(self) -> None:
        """Reopen now every stream that is waiting out its backoff."""
        for s in self._streams:
            if not s.health.connected:
                s.retry_now()

    def stream_health(self) -> list[StreamHealth]:
        """Health of each stream, for status."""
        return [s.health for s in self._streams]

    # --- libxmtp's database -------------------------------------------------------

    async def release_db(self) -> None:
        """Let go of libxmtp's database (checkpointed) so its files can be copied."""
        await self._x.call_sync(
            self._client.release_db_connection, LOCAL_CALL_S, "releasing libxmtp's database"
        )

    async def reconnect_db(self) -> None:
        """Reopen libxmtp's database after `release_db`; when that fails (a full disk),
        keep trying in the background, so libxmtp works again once it can."""
        try:
            await self._reconnect_once()
        except ConeError:
            if self._reconnecting is None or self._reconnecting.done():
                self._reconnecting = asyncio.create_task(self._reconnect_until_done())
            raise

    async def _reconnect_until_done(self) -> None:
        delay = 0.5
        while True:
            await asyncio.sleep(delay)
            try:
                await self._reconnect_once()
            except ConeError as exc:
                log.warning("reopening libxmtp's database failed again: %s", exc)
                delay = min(delay * 2, 30.0)
            else:
                log.info("libxmtp's database is open again")
                return

    async def _reconnect_once(self) -> None:
        await self._x.call(self._client.db_reconnect, LOCAL_CALL_S, "reopening libxmtp's database")

    async def close(self) -> None:
        """Stop the streams, release libxmtp's database and end the threads that made
        its calls (cone/engine/_offload.py); the engine takes no calls after."""
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            await asyncio.gather(self._reconnecting, return_exceptions=True)
        await self._cut.close()
        await asyncio.gather(*(s.stop() for s in self._streams))
        self._streams = []
        try:
            await self.release_db()
        except ConeError as exc:
            log.warning("releasing libxmtp's database: %s", exc)
        self._x.offload.close()


__all__ = [
    "ConsentUpdate",
    "ConversationInfo",
    "Engine",
    "RawMessage",
    "XmtpConsent",
]
