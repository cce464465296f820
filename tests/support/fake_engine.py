"""An in-memory engine for unit tests of the core's logic (routing, consent, the outbox).

`FakeEngine` implements `cone.engine.port.EnginePort` with plain dictionaries: a tiny
XMTP network (which addresses and inboxes exist), libxmtp's conversations with their
messages, and XMTP's consent records. It makes no network call and imports no
xmtp-bindings. Tests steer it directly: `peer` puts an identity on the network,
`incoming` stores a peer's message, `fail_publish`/`fail_prepare` queue errors, and
`crash_after_prepare` makes the next publish die as a process would.

Only the core's logic is under test with it: libxmtp's own behaviour is covered by
the end-to-end tests on the devnet.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace

from cone.core import content
from cone.engine.port import (
    Action,
    ConsentUpdate,
    ConversationInfo,
    Details,
    ListedConversation,
    Member,
    NewestStamps,
    RawMessage,
    Role,
    StreamHealth,
    XmtpConsent,
)
from cone.errors import ConeError, NotFound, Unavailable


def hex_id(*parts: str) -> str:
    """A stable 64-hex id made from `parts` (an inbox id's length)."""
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def conversation_id(*parts: str) -> str:
    """A stable 32-hex id made from `parts` (a conversation id's length)."""
    return hex_id("conversation", *parts)[:32]


class Crash(Exception):
    """The process dying mid-call: nothing after it is recorded (not a ConeError)."""


@dataclass
class _Conversation:
    info: ConversationInfo
    messages: list[RawMessage] = field(default_factory=list)
    members: set[str] = field(default_factory=set)
    app_data: str = ""
    active: bool = True
    name: str | None = None


class FakeGroups:
    """Groups kept in the fake's conversations; every change is permitted."""

    def __init__(self, engine: FakeEngine) -> None:
        self._e = engine

    def _group(self, conversation_id: str) -> _Conversation:
        conv = self._e.held.get(conversation_id)
        if conv is None or not conv.info.is_group:
            raise NotFound(f"no group {conversation_id}", reason="unknown_conversation")
        return conv

    async def details(self, conversation_ids: list[str]) -> dict[str, Details]:
        out = {}
        for cid in conversation_ids:
            conv = self._e.held.get(cid)
            if conv is not None:
                out[cid] = Details(cid, conv.info.is_group, conv.active, conv.name, None, None)
        return out

    async def addresses(self, inbox_ids: list[str]) -> dict[str, list[str]]:
        return {
            i: self._e.addresses_by_inbox[i] for i in inbox_ids if i in self._e.addresses_by_inbox
        }

    async def member_count(self, conversation_id: str) -> int:
        return len(self._group(conversation_id).members)

    async def members(self, conversation_id: str) -> list[Member]:
        conv = self._group(conversation_id)
        return sorted(
            (
                Member(
                    i,
                    self._e.addresses_by_inbox.get(i, []),
                    Role.SUPER_ADMIN if i == conv.info.peer_inbox_id else Role.MEMBER,
                )
                for i in conv.members
            ),
            key=lambda m: (-m.role.value, m.inbox_id),
        )

    async def disappearing(self, conversation_ids: list[str]) -> dict[str, tuple[int, int]]:
        return {}

    async def find_created(self, app_data: str) -> str | None:
        for cid, conv in self._e.held.items():
            if conv.info.is_group and conv.app_data == app_data:
                return cid
        return None

    async def create_local(
        self, *, name: str | None, description: str | None, image_url: str | None, app_data: str
    ) -> str:
        cid = conversation_id("group", app_data)
        info = ConversationInfo(cid, True, self._e.inbox_id, XmtpConsent.UNKNOWN)
        self._e.held[cid] = _Conversation(
            info, members={self._e.inbox_id}, app_data=app_data, name=name
        )
        return cid

    async def check(self, conversation_id: str, action: Action) -> None:
        self._group(conversation_id)

    async def add_members(self, conversation_id: str, inbox_ids: list[str]) -> list[str]:
        conv = self._group(conversation_id)
        added = sorted(set(inbox_ids) - conv.members)
        conv.members |= set(added)
        return added

    async def remove_members(self, conversation_id: str, inbox_ids: list[str]) -> None:
        self._group(conversation_id).members -= set(inbox_ids)

    async def leave(self, conversation_id: str) -> None:
        conv = self._group(conversation_id)
        conv.members.discard(self._e.inbox_id)
        conv.active = False

    async def update(
        self,
        conversation_id: str,
        *,
        name: str | None,
        description: str | None,
        image_url: str | None,
    ) -> None:
        if name is not None:
            self._group(conversation_id).name = name


class FakeInstallations:
    """This inbox's installations, as a list."""

    def __init__(self, engine: FakeEngine) -> None:
        self.ids = [engine.installation_id]

    async def revoke(self, installation_ids: list[str] | None) -> tuple[list[str], int]:
        targets = self.ids[1:] if installation_ids is None else list(installation_ids)
        self.ids = [i for i in self.ids if i not in targets]
        return targets, len(self.ids)


class FakeEngine:
    """An in-memory `EnginePort`."""

    def __init__(self, name: str = "me") -> None:
        self.address = "0x" + hex_id("address", name)[:40]
        self.inbox_id = hex_id("inbox", name)
        self.installation_id = hex_id("installation", name)
        self.api_url = "http://fake.invalid"
        self.backend = "v3"
        self.gateway_url: str | None = None
        # The network: who is on XMTP.
        self.inbox_by_address: dict[str, str] = {}
        self.addresses_by_inbox: dict[str, list[str]] = {}
        # libxmtp's database.
        self.held: dict[str, _Conversation] = {}
        # XMTP's consent records, as the core last set them.
        self.conversation_consent: dict[str, XmtpConsent] = {}
        self.inbox_consent_records: dict[str, XmtpConsent] = {}
        # Steering and observation.
        self.online = True
        self.fail_prepare: list[ConeError] = []
        self.fail_publish: list[ConeError] = []
        self.crash_after_prepare = False
        self.prepared: list[str] = []
        self.published: list[str] = []
        self.listings = 0  # conversation listings asked for
        self.stamps_readable = True  # False: `newest_stamps` fails, as a child might
        self.stamp_reads = 0  # `newest_stamps` asked for
        self.reads: list[str] = []  # conversations whose messages were read, in turn
        self.handlers: dict[str, Callable[..., None]] = {}
        self.groups = FakeGroups(self)
        self.installations = FakeInstallations(self)
        self._last_ns = 0

    # --- steering ---------------------------------------------------------------------

    def peer(self, name: str) -> tuple[str, str]:
        """Put an identity on the network; its (address, inbox id)."""
        address = "0x" + hex_id("address", name)[:40]
        inbox_id = hex_id("inbox", name)
        self.inbox_by_address[address] = inbox_id
        self.addresses_by_inbox[inbox_id] = [address]
        return address, inbox_id

    def dm_id(self, inbox_id: str) -> str:
        """The id the DM with `inbox_id` has (made or not)."""
        return conversation_id("dm", *sorted((self.inbox_id, inbox_id)))

    def dm(self, inbox_id: str, consent: XmtpConsent = XmtpConsent.UNKNOWN) -> str:
        """libxmtp holds a DM with `inbox_id` (as when the peer wrote first); its id."""
        cid = self.dm_id(inbox_id)
        if cid not in self.held:
            info = ConversationInfo(cid, False, inbox_id, consent)
            self.held[cid] = _Conversation(info, members={self.inbox_id, inbox_id})
        return cid

    def group(self, added_by: str, members: list[str]) -> str:
        """libxmtp holds a group another inbox added this one to; its id."""
        cid = conversation_id("group", added_by, *members)
        info = ConversationInfo(cid, True, added_by, XmtpConsent.UNKNOWN)
        self.held[cid] = _Conversation(info, members={self.inbox_id, added_by, *members})
        return cid

    def incoming(self, conversation_id: str, sender: str, text: str) -> RawMessage:
        """A peer's text message stored in a conversation."""
        _, payload = content.encode(text=text)
        return self._store(conversation_id, sender, payload)

    def group_update(
        self,
        conversation_id: str,
        sender: str,
        *,
        name: str | None = None,
        inserted_at_ns: int | None = None,
    ) -> RawMessage:
        """A group update `sender` made, as libxmtp applies it: the change (a new name,
        when given) and its protocol message stored with it (`inserted_at_ns`: a
        stamp of its own, as one an ingest missed)."""
        if name is not None:
            self.held[conversation_id].name = name
        stored = self._store(conversation_id, sender, b"")
        m = replace(
            stored,
            application=False,
            inserted_at_ns=stored.inserted_at_ns if inserted_at_ns is None else inserted_at_ns,
        )
        self.held[conversation_id].messages[-1] = m
        return m

    def _store(self, conversation_id: str, sender: str, payload: bytes) -> RawMessage:
        # libxmtp stamps by the clock; distinct stamps keep the order plain.
        now = self._last_ns = max(self._last_ns + 1, time.time_ns())
        conv = self.held[conversation_id]
        m = RawMessage(
            id=hex_id("message", conversation_id, str(now)),
            conversation_id=conversation_id,
            sender_inbox_id=sender,
            sent_at_ns=now,
            inserted_at_ns=now,
            content=payload,
            application=True,
        )
        conv.messages.append(m)
        return m

    # --- conversations and messages ---------------------------------------------------

    async def conversations(self, expected: int = 0) -> list[ListedConversation]:
        # As libxmtp's listing: each with its newest message by the sender's clock.
        self.listings += 1
        return [
            ListedConversation(
                c.info.id,
                max(c.messages, key=lambda m: m.sent_at_ns).id if c.messages else "",
            )
            for c in self.held.values()
        ]

    async def conversation(self, conversation_id: str) -> ConversationInfo | None:
        conv = self.held.get(conversation_id)
        if conv is None:
            return None
        consent = self.conversation_consent.get(conversation_id, conv.info.consent)
        return replace(conv.info, consent=consent)

    async def messages_since(
        self, conversation_id: str, inserted_after_ns: int
    ) -> list[RawMessage]:
        self.reads.append(conversation_id)
        conv = self.held.get(conversation_id)
        msgs = conv.messages if conv is not None else []
        return [m for m in msgs if m.inserted_at_ns > inserted_after_ns]

    async def message_pages(
        self, conversation_id: str, inserted_after_ns: int
    ) -> AsyncIterator[list[RawMessage]]:
        # Small pages, so that the core's paging is exercised.
        msgs = await self.messages_since(conversation_id, inserted_after_ns)
        for i in range(0, len(msgs), 2):
            yield msgs[i : i + 2]
        if not msgs:
            yield []

    async def message_count(self, conversation_id: str) -> int:
        return len(self.held[conversation_id].messages)

    async def newest_stamps(self) -> NewestStamps | None:
        self.stamp_reads += 1
        if not self.stamps_readable:
            return None
        taken = time.time_ns()
        return NewestStamps(
            taken,
            {
                cid: max((m.inserted_at_ns for m in c.messages), default=0)
                for cid, c in self.held.items()
            },
        )

    async def own_messages(self, conversation_id: str, inserted_after_ns: int) -> list[RawMessage]:
        return [
            m
            for m in await self.messages_since(conversation_id, inserted_after_ns)
            if m.sender_inbox_id == self.inbox_id
        ]

    def deleted_message_id(self, encoded_content: bytes) -> str | None:
        return None

    # --- the network ------------------------------------------------------------------

    def _reach(self, doing: str) -> None:
        if not self.online:
            raise Unavailable(f"{doing} failed: the fake network is down")

    async def sync_all(self) -> None:
        if not self.online:
            raise Unavailable("syncing failed: the fake network is down", reason="sync_failed")

    async def sync_conversation(self, conversation_id: str) -> None:
        self._reach("syncing a conversation")

    async def own_commits_lost(self, conversation_id: str) -> int:
        return 0

    async def rotate_keys(self, conversation_id: str) -> None:
        self._reach("rotating a conversation's keys")

    async def resolve(self, identifier: str) -> str | None:
        if identifier.startswith("0x"):
            self._reach("resolving")
            return self.inbox_by_address.get(identifier)
        if identifier in self.addresses_by_inbox:
            return identifier
        self._reach(f"resolving {identifier}")
        return None

    async def addresses_of(self, inbox_id: str) -> list[str]:
        return list(self.addresses_by_inbox.get(inbox_id, []))

    async def find_or_create_dm(self, inbox_id: str) -> ConversationInfo:
        cid = self.dm_id(inbox_id)
        if cid not in self.held:
            self._reach(f"creating the DM with {inbox_id}")
            self.dm(inbox_id)
        info = await self.conversation(cid)
        assert info is not None
        return info

    async def budgets(self) -> tuple[int, int]:
        return len(self.installations.ids), 1

    def v3_cutover(self) -> bool:
        return False

    def on_switch(self, handler: Callable[[], Awaitable[None]]) -> None:
        pass  # the fake never meets a cutover

    # --- consent ----------------------------------------------------------------------

    def _record(self, conversation_id: str, peer_inbox_id: str | None, state: XmtpConsent) -> None:
        self.conversation_consent[conversation_id] = state
        if peer_inbox_id:
            self.inbox_consent_records[peer_inbox_id] = state

    async def set_consent(
        self, *, conversation_id: str, allowed: bool, peer_inbox_id: str | None = None
    ) -> None:
        state = XmtpConsent.ALLOWED if allowed else XmtpConsent.DENIED
        self._record(conversation_id, peer_inbox_id, state)

    async def reset_consent(self, *, conversation_id: str, peer_inbox_id: str | None) -> None:
        self._record(conversation_id, peer_inbox_id, XmtpConsent.UNKNOWN)

    async def inbox_consent(self, inbox_id: str) -> XmtpConsent:
        return self.inbox_consent_records.get(inbox_id, XmtpConsent.UNKNOWN)

    # --- sending ----------------------------------------------------------------------

    async def prepare(self, conversation_id: str, payload: bytes) -> str:
        if self.fail_prepare:
            raise self.fail_prepare.pop(0)
        if conversation_id not in self.held:
            raise Unavailable("preparing a message failed: no such conversation")
        m = self._store(conversation_id, self.inbox_id, payload)
        self.prepared.append(m.id)
        return m.id

    async def publish(
        self, conversation_id: str, message_id: str, seen: Callable[[], None] = lambda: None
    ) -> None:
        if self.crash_after_prepare:
            self.crash_after_prepare = False
            raise Crash("the process died before publishing")
        if self.fail_publish:
            raise self.fail_publish.pop(0)
        assert any(m.id == message_id for m in self.held[conversation_id].messages)
        self.published.append(message_id)
        seen()  # the node has it: its echo comes before libxmtp's call returns

    async def send(
        self,
        conversation_id: str,
        payload: bytes,
        prepared: Callable[[str], None],
        seen: Callable[[], None] = lambda: None,
    ) -> str:
        message_id = await self.prepare(conversation_id, payload)
        prepared(message_id)
        await self.publish(conversation_id, message_id, seen)
        return message_id

    # --- streams and lifecycle --------------------------------------------------------

    async def start_streams(
        self,
        *,
        on_message: Callable[[RawMessage], None],
        on_conversation: Callable[[str], None],
        on_consent: Callable[[list[ConsentUpdate]], None],
        on_restart: Callable[[], None],
    ) -> None:
        self.handlers = {
            "message": on_message,
            "conversation": on_conversation,
            "consent": on_consent,
            "restart": on_restart,
        }

    def reconnect_streams(self) -> None:
        pass

    def stream_health(self) -> list[StreamHealth]:
        return [
            StreamHealth(name, connected=True)
            for name in ("messages", "requests", "accepted", "conversations", "consent")
        ]

    async def release_db(self) -> None:
        pass

    async def reconnect_db(self) -> None:
        pass

    async def close(self) -> None:
        pass
