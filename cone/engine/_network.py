"""What the engine asks of the XMTP network: sync, inbox lookups and the DM with a peer.

Part of the engine: calls go through its `Calls`. Lookups fall back on libxmtp's
local record of an inbox where the network cannot answer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, Final

from xmtp_bindings import xmtpv3 as ffi

from cone import _malloc
from cone.engine import _convert
from cone.engine._calls import LOCAL_CALL_S, NETWORK_CALL_S, Calls, answered
from cone.engine._cutover import Cutover
from cone.engine._errors import is_absent
from cone.engine.values import ConversationInfo, SyncSummary
from cone.errors import ConeError, Unavailable

# What status waits for libxmtp's view of the inbox before reporting it unknown.
STATUS_CALL_S: Final = 5.0

# How libxmtp 1.10's local commit log (`conversation_debug_info`) names a commit of
# this installation's own that it could not apply (see `Network.own_commits_lost`).
OWN_COMMIT_UNAPPLIED: Final = "CannotDecryptOwnMessage"


class Network:
    """Sync and lookups through one identity's libxmtp client.

    `client` gives libxmtp's current client at each call (it changes at the cutover)."""

    def __init__(self, client: Callable[[], Any], calls: Calls, cutover: Cutover) -> None:
        self._client = client
        self._x = calls
        self._cut = cutover

    async def sync_all(self) -> SyncSummary | None:
        """Welcomes, conversations, messages and consent, and what the conversations'
        sync did (`SyncSummary`; None when libxmtp's answer is not one); Unavailable
        when it fails.

        `sync_all_conversations` takes in the welcomes first (a separate welcome sync
        before it processed a burst's welcomes twice over). It runs on a worker thread
        of its own, not on the lane: taking in hundreds of welcomes is minutes of
        libxmtp's work done inside the polls of that one call, and on the lane every
        other asynchronous call (ingest's reads of new conversations) waited behind it."""
        conversations = self._client().conversations
        try:
            done = await self._x.call_sync(
                # An async call on a worker's own loop (the offload awaits it there).
                lambda: conversations().sync_all_conversations(None),
                NETWORK_CALL_S,
                "syncing welcomes and conversations",
            )
            await self._x.call(self._client().sync_preferences, NETWORK_CALL_S, "syncing consent")
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
            lambda: self._client().conversation(key).sync(),
            NETWORK_CALL_S,
            "syncing a conversation",
        )

    async def own_commits_lost(self, conversation_id: str) -> int:
        """How many commits this installation made that libxmtp could not apply here.

        A commit is applied by the installation that makes it, never read back: the
        only way libxmtp meets one of its own it did not make is a restored copy of
        its database reading what the original made after the backup. libxmtp logs
        each such commit in its local commit log as undecryptable
        (`CannotDecryptOwnMessage`); this conversation's state is then behind the
        group's, and anything it encrypts is lost to the other members."""
        key = bytes.fromhex(conversation_id)

        async def info() -> Any:
            return await self._client().conversation(key).conversation_debug_info()

        found = await self._x.call(info, LOCAL_CALL_S, "reading a conversation's commit log")
        return str(found.local_commit_log).count(OWN_COMMIT_UNAPPLIED)

    async def rotate_keys(self, conversation_id: str) -> None:
        """Publish a read receipt, which libxmtp precedes with the key update it has
        due (a restored copy's, cone/store/backup.py), and return once both are
        published and read back: every message after it uses the new epoch's keys.

        The receipt is the carrier because libxmtp 1.10 makes a key update only
        before a message. A sync running beside this may encrypt the receipt before
        the key update is applied, with a key the original used (peers drop it); what
        matters is the key update, applied before this returns."""
        key = bytes.fromhex(conversation_id)
        receipt = ffi.encode_read_receipt(ffi.FfiReadReceipt())

        def published() -> Any:
            conversation = self._client().conversation(key)
            message = conversation.prepare_message(receipt, False)
            return conversation.publish_stored_message(message)

        await self._x.call(published, NETWORK_CALL_S, "rotating a conversation's keys")

    async def resolve(self, identifier: str) -> str | None:
        """The inbox id for an address or inbox id, or None when it is not on XMTP.

        With the network down, an inbox id libxmtp already holds still resolves."""
        try:
            if identifier.startswith("0x"):
                ident = ffi.FfiIdentifier(
                    identifier=identifier.lower(), identifier_kind=ffi.FfiIdentifierKind.ETHEREUM
                )
                inbox: str | None = await self._x.call(
                    lambda: self._client().find_inbox_id(ident), NETWORK_CALL_S, "resolving"
                )
                return inbox
            states = await self._x.call(
                lambda: self._client().addresses_from_inbox_id(True, [identifier]),
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
                lambda: self._client().addresses_from_inbox_id(False, [inbox_id]),
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

    async def find_or_create_dm(self, inbox_id: str) -> tuple[ConversationInfo, bool]:
        """The DM with `inbox_id`, created (and published) if there is none; and
        whether this call made it."""
        doing = f"creating the DM with {inbox_id}"

        async def dm() -> tuple[ConversationInfo, bool]:
            asked_ns = time.time_ns()
            client = self._client()
            options = ffi.FfiCreateDmOptions(message_disappearing_settings=None)
            conv = await client.conversations().find_or_create_dm(inbox_id, options)
            # libxmtp stamps a DM it makes with the time it made it; one it found
            # (the peer's, or made before) is older.
            made = conv.added_by_inbox_id() == client.inbox_id() and (
                conv.created_at_ns() >= asked_ns
            )
            return _convert.info(conv), made

        try:
            return await self._x.call(dm, NETWORK_CALL_S, doing)
        except Unavailable as err:
            raise await self._cut.unless_refused(err, doing) from err.__cause__

    async def budgets(self) -> tuple[int, int]:
        """(active installations, identity updates) of this inbox, from local state."""

        async def read() -> tuple[int, int]:
            state = await self._client().inbox_state(False)
            updates = await self._client().fetch_own_inbox_updates_count(False)
            return len(state.installations), int(updates)

        return await self._x.call(read, STATUS_CALL_S, "reading the inbox state")


__all__ = ["STATUS_CALL_S", "Network"]
