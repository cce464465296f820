"""The XMTP engine: cone's one adapter over libxmtp (xmtp-bindings).

Everything cone needs from XMTP goes through `Engine`, which serves every role of
cone/engine/roles/ (reads, sync, directory, consent, publishing, streams, groups,
node probe, attachment fetching, libxmtp's database). libxmtp errors are translated
here, once, into ConeErrors (cone/engine/_calls.py). `Engine` opens the client (with
cone's refusals, _opening.py), moves it to D14N at the cutover and keeps the streams;
each other part is a module of its own whose methods it serves as they are: reads of
libxmtp's database (_reads.py), sync and lookups (_network.py), sending
(_sending.py); and it delegates to the database's connection (_database.py), groups,
consent and installations.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from cone import _failpoints
from cone.engine import deletions
from cone.engine._calls import LOCAL_CALL_S, Calls
from cone.engine._children import DatabaseChild
from cone.engine._client import wallet_address
from cone.engine._cutover import Cutover
from cone.engine._database import Database
from cone.engine._echoes import ConsentEchoes, Echoes
from cone.engine._network import Network
from cone.engine._node import NodeProbe
from cone.engine._offload import Offload
from cone.engine._opening import REGISTER_S, open_identity
from cone.engine._reads import Reads
from cone.engine._sending import Sending
from cone.engine._stamps import Stamps
from cone.engine._subscriptions import Regrouping, supervised_streams
from cone.engine.consent import Consent
from cone.engine.groups import Groups
from cone.engine.installations import Installations
from cone.engine.roles.probe import Probe
from cone.engine.streams import SupervisedStream
from cone.engine.values import (
    ConsentUpdate,
    ConversationInfo,
    ListedConversation,
    NewestStamps,
    RawMessage,
    StreamHealth,
    XmtpConsent,
)
from cone.errors import ConeError, StateError

log = logging.getLogger(__name__)


class Engine:
    """An open libxmtp client for one identity: every role of cone/engine/roles/
    (`port.EnginePort`)."""

    def __init__(
        self,
        client: Any,
        wallet_key: bytes,
        offload: Offload,
        inbox_id: str,
        installation_id: str,
        api_url: str = "",
        gateway_url: str | None = None,
        database: tuple[Path, bytes, DatabaseChild] | None = None,
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
        self._handlers: dict[str, Any] = {}
        # A consent change moves a conversation between the message streams.
        self._regrouping = Regrouping(lambda: self._streams)
        self._consent_echoes = ConsentEchoes()
        # This engine's sends, whose stream echoes are dropped (cone/engine/_echoes.py).
        self._echoes = Echoes(inbox_id)
        # These read the client at each call, so the cutover's swap reaches them and
        # what they keep (the listing's size, a reopening in the background) carries over.
        self._reads = Reads(self._current, self._x, inbox_id)
        self._network = Network(self._current, self._x, self._cut)
        self._sending = Sending(self._current, self._x, self._cut, self._echoes)
        self._db = Database(self._current, self._x)
        # The roles these parts serve as they are (each documented in its role,
        # cone/engine/roles/), bound once: the parts read the current client at each call.
        reads, network, sending = self._reads, self._network, self._sending
        self.conversations = reads.conversations
        self.conversation = reads.conversation
        self.messages_since = reads.messages_since
        self.message_pages = reads.message_pages
        self.message_count = reads.message_count
        self.own_messages = reads.own_messages
        self.sync_all = network.sync_all
        self.sync_conversation = network.sync_conversation
        self.own_commits_lost = network.own_commits_lost
        self.rotate_keys = network.rotate_keys
        self.resolve = network.resolve
        self.addresses_of = network.addresses_of
        self.budgets = network.budgets
        self.prepare = sending.prepare
        self.send = sending.send
        self.publish = sending.publish
        # libxmtp's database file and key (the D14N client opens the same one), and
        # what reads it in a child process.
        if database is not None:
            path, key, child = database
            self._stamps: Stamps | None = Stamps(path, key, self._x, child)
        else:
            self._stamps = None
        self._attach(client)

    def _current(self) -> Any:
        """libxmtp's client in use (the D14N one after the cutover)."""
        return self._client

    def _attach(self, client: Any) -> None:
        """Use `client` from now on; the adapters holding it are built anew."""
        self._client = client
        self.groups = Groups(client, self.inbox_id, self._x, self._regrouping.creating)
        self.installations = Installations(client, self._wallet_key, self._x)
        self._consent = Consent(client, self._x)

    @classmethod
    async def open(
        cls, *, api_url: str, db_path: str, db_key: bytes, wallet_key: bytes, new: bool,
        gateway_url: str | None = None, cutover_gateway: str | None = None,
        child: DatabaseChild,
    ) -> Engine:  # fmt: skip
        """Open the client. With `new=False` a new installation is refused, not made,
        and nothing goes to the network: a registered identity opens offline. With
        `gateway_url`, libxmtp runs on D14N through that gateway. With
        `cutover_gateway`, a client on V3 moves itself to D14N through that gateway
        when its node cuts over (`on_switch`). `child` works on libxmtp's database
        file in a child process: the daemon gives cone/store/xmtp_database.py."""
        offload = Offload()
        opened = await open_identity(
            offload, api_url=api_url, db_path=db_path, db_key=db_key, wallet_key=wallet_key,
            new=new, gateway_url=gateway_url, child=child,
        )  # fmt: skip
        engine = cls(
            opened.client, wallet_key, offload, opened.inbox_id, opened.installation_id,
            api_url, gateway_url, (Path(db_path), db_key, child),
        )  # fmt: skip
        if cutover_gateway and not gateway_url:
            move = functools.partial(engine._move_to_d14n, cutover_gateway, opened.reopen)
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
        await self._stop_streams()
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

    # --- reads beyond _reads.py: the stamps (a child process), deletions named ------

    async def newest_stamps(self) -> NewestStamps | None:
        """Each conversation's newest insert stamp in libxmtp's database, in one read
        (cone/engine/_stamps.py); None when it failed (logged)."""
        return await self._stamps.read() if self._stamps is not None else None

    #: The message id a peer's deleteMessage content names (cone/engine/deletions.py).
    deleted_message_id = staticmethod(deletions.deleted_message_id)

    # --- the DM with a peer (cone/engine/_network.py), its stream regrouped --------

    async def find_or_create_dm(self, inbox_id: str) -> ConversationInfo:
        """The DM with `inbox_id`, created (and published) if there is none."""
        with self._regrouping.creating() as made:
            dm, new = await self._network.find_or_create_dm(inbox_id)
            if new:
                made(dm.id)
        return dm

    # --- consent (cone/engine/consent.py) ------------------------------------------

    async def set_consent(
        self, *, conversation_id: str, allowed: bool, peer_inbox_id: str | None = None
    ) -> None:
        """Record consent in XMTP (synced to this inbox's other installations)."""
        consent = XmtpConsent.ALLOWED if allowed else XmtpConsent.DENIED
        await self._recording(
            conversation_id, consent, self._consent.set(conversation_id, peer_inbox_id, allowed)
        )

    async def reset_consent(self, *, conversation_id: str, peer_inbox_id: str | None) -> None:
        """Set XMTP's consent records for a conversation (and a DM's peer) back to unknown."""
        await self._recording(
            conversation_id,
            XmtpConsent.UNKNOWN,
            self._consent.reset(conversation_id, peer_inbox_id),
        )

    async def _recording(
        self, conversation_id: str, consent: XmtpConsent, call: Awaitable[bool | None]
    ) -> None:
        # The consent stream hands the record back: noted first, its echo renews nothing.
        # A record that did not change (`call` says False) has no echo to wait for.
        self._consent_echoes.add(conversation_id, consent)
        changed = False
        try:
            changed = await call is not False
        finally:
            if not changed:
                self._consent_echoes.discard(conversation_id, consent)
        if changed:
            self._regrouping.changed(conversation_id, consent)

    async def inbox_consent(self, inbox_id: str) -> XmtpConsent:
        """XMTP's consent record for an inbox."""
        return await self._consent.of_inbox(inbox_id)

    # --- the node probe (cone/engine/_node.py) and remote attachments -------------

    def node_probe(self, gateway_url: str | None) -> Probe:
        """A probe of this identity on the node at the API URL, or (D14N) on the node
        `gateway_url` names: its own gRPC channels, no libxmtp."""
        return NodeProbe(self.api_url, self.inbox_id, self.installation_id, gateway_url)

    async def fetch_attachment(self, reference: Mapping[str, Any]) -> bytes:
        """A remote attachment downloaded, checked and decrypted: its envelope
        (cone/engine/_download.py, under the daemon's policy for a peer's URL)."""
        # Imported here: aiohttp takes ~0.15 s to load, which every start of a daemon
        # or a one-shot command would pay for the rare remote attachment.
        from cone.engine._download import download

        return await download(reference)

    # --- streams ----------------------------------------------------------------

    async def start_streams(
        self,
        *,
        on_message: Callable[[RawMessage], None],
        on_conversation: Callable[[str], None],
        on_consent: Callable[[list[ConsentUpdate]], None],
        on_restart: Callable[[], None],
    ) -> None:
        """Open the message (two: cone/engine/_subscriptions.py), conversation and
        consent streams under supervision.

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

        def consent(updates: list[ConsentUpdate]) -> None:
            # Another installation's change moves a conversation; this one's own
            # coming back does not again.
            told = []
            for u in updates:
                cid = u.conversation_id
                if cid is not None and self._consent_echoes.take(cid, u.consent):
                    u = replace(u, own=True)
                elif cid is not None:
                    self._regrouping.changed(cid, u.consent)
                told.append(u)
            on_consent(told)

        self._streams = supervised_streams(
            self._current,
            self._x,
            regrouping=self._regrouping,
            on_message=on_message,
            on_conversation=on_conversation,
            on_consent=consent,
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

    async def _stop_streams(self) -> None:
        """Stop every stream at once: each waits for libxmtp's task to end."""
        self._regrouping.cancel()
        await asyncio.gather(*(s.stop() for s in self._streams))
        self._streams = []

    # --- libxmtp's database (cone/engine/_database.py) ----------------------------

    async def release_db(self) -> None:
        """Let go of libxmtp's database (checkpointed) so its files can be copied."""
        await self._db.release()

    async def reconnect_db(self) -> None:
        """Reopen libxmtp's database after `release_db`; when that fails (a full disk),
        keep trying in the background, so libxmtp works again once it can."""
        await self._db.reconnect()

    async def close(self) -> None:
        """Stop the streams, release libxmtp's database and end the threads that made
        its calls (cone/engine/_offload.py); the engine takes no calls after."""
        await self._db.stop()
        await self._cut.close()
        await self._stop_streams()
        try:
            await self.release_db()
        except ConeError as exc:
            log.warning("releasing libxmtp's database: %s", exc)
        self._x.offload.close()


__all__ = [
    "ConsentUpdate",
    "ConversationInfo",
    "Engine",
    "ListedConversation",
    "RawMessage",
    "XmtpConsent",
]
