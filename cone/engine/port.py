"""The engine as the core sees it: its values and its interface, without libxmtp.

`EnginePort` names exactly what the core uses of the engine (`cone.engine.engine.Engine`
implements it over libxmtp; tests/support/fake_engine.py in memory, for unit tests of
the core's logic). The values here are plain data, so the core and a fake need no
xmtp-bindings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

# The node probe speaks to the node over its own gRPC channel (no libxmtp): the core
# holds it directly, so its types are the port's too.
from cone.engine._node import NodeAnswer, NodeProbe, NodeView


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


@dataclass(frozen=True)
class ListedConversation:
    """A conversation in libxmtp's listing: what the listing itself holds. Its consent
    and a group's adder cost a query of libxmtp's database each, over half a listing's
    time at 10,000 conversations: read them for one conversation with `conversation`."""

    id: str
    # The id of the newest message the listing shows for it ("" when none). The
    # listing shows only some content types and orders by the sender's clock: a hint
    # of news, never proof that nothing is new.
    last_message_id: str = ""


@dataclass(frozen=True)
class NewestStamps:
    """Each conversation's newest insert stamp in libxmtp's database (0: none stored),
    read once, with the clock before the read began: whatever libxmtp stores later is
    stamped no earlier than it, less the read path's margin (cone/core/intake/committing.py)."""

    taken_ns: int
    newest: Mapping[str, int]

    def nothing_after(self, conversation_id: str, point_ns: int) -> bool:
        """Whether a read of the conversation's messages stamped after `point_ns`
        would have found none when these stamps were read (False when the read did
        not see the conversation)."""
        stamp = self.newest.get(conversation_id)
        return stamp is not None and stamp <= point_ns


@dataclass(frozen=True)
class SyncSummary:
    """What libxmtp's sync of every conversation reports (its `GroupSyncSummary`)."""

    # The conversations it listed to sync: every one libxmtp holds whose consent is
    # not denied, the device-sync group and duplicate DMs included, so not the count
    # of `conversations()`. A welcome adds one; a block (consent denied) takes one away.
    eligible: int
    # Those the node had news for and libxmtp synced without an error. A group whose
    # sync failed part-way is not counted, though what it took in before is stored.
    synced: int


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


@dataclass(frozen=True)
class ConsentUpdate:
    """A consent change XMTP reported (from any installation of this inbox)."""

    conversation_id: str | None
    inbox_id: str | None
    consent: XmtpConsent


@dataclass
class StreamHealth:
    """What status reports about one stream."""

    name: str
    connected: bool = False
    last_event_ns: int | None = None
    restarts: int = 0
    last_error: str | None = None


class Role(Enum):
    """A member's permission level in a group."""

    MEMBER = 0
    ADMIN = 1
    SUPER_ADMIN = 2


class Action(Enum):
    """A group change, named for its permission policy."""

    ADD_MEMBERS = "add_member_policy"
    REMOVE_MEMBERS = "remove_member_policy"
    UPDATE_NAME = "update_group_name_policy"
    UPDATE_DESCRIPTION = "update_group_description_policy"
    UPDATE_IMAGE = "update_group_image_url_square_policy"


@dataclass(frozen=True)
class Member:
    """A member of a group: its inbox, addresses and role."""

    inbox_id: str
    addresses: list[str]
    role: Role


@dataclass(frozen=True)
class Details:
    """What libxmtp knows of a conversation beyond cone's record."""

    id: str
    is_group: bool
    active: bool
    name: str | None
    description: str | None
    image_url: str | None


class GroupsPort(Protocol):
    """Groups and conversation details (cone/engine/groups.py)."""

    async def details(self, conversation_ids: list[str]) -> dict[str, Details]:
        """Details of the conversations libxmtp knows among these."""
        ...

    async def addresses(self, inbox_ids: list[str]) -> dict[str, list[str]]:
        """The addresses of these inboxes that libxmtp knows locally."""
        ...

    async def member_count(self, conversation_id: str) -> int:
        """How many inboxes are members of a group."""
        ...

    async def members(self, conversation_id: str) -> list[Member]:
        """The members of a group, highest role first."""
        ...

    async def disappearing(self, conversation_ids: list[str]) -> dict[str, tuple[int, int]]:
        """The disappearing-message settings in force among these conversations."""
        ...

    async def find_created(self, app_data: str) -> str | None:
        """The group this identity made with this `app_data`, if any."""
        ...

    async def create_local(
        self, *, name: str | None, description: str | None, image_url: str | None, app_data: str
    ) -> str:
        """Make a group locally (nothing published yet); its id."""
        ...

    async def check(self, conversation_id: str, action: Action) -> None:
        """FailedPrecondition when this identity may not make the change."""
        ...

    async def add_members(self, conversation_id: str, inbox_ids: list[str]) -> list[str]:
        """Add inboxes to a group; the ones newly added."""
        ...

    async def remove_members(self, conversation_id: str, inbox_ids: list[str]) -> None:
        """Remove inboxes from a group."""
        ...

    async def leave(self, conversation_id: str) -> None:
        """Ask to leave a group."""
        ...

    async def update(
        self,
        conversation_id: str,
        *,
        name: str | None,
        description: str | None,
        image_url: str | None,
    ) -> None:
        """Change the given fields of a group's metadata."""
        ...


class InstallationsPort(Protocol):
    """This inbox's installations (cone/engine/installations.py)."""

    async def revoke(self, installation_ids: list[str] | None) -> tuple[list[str], int]:
        """Revoke these installations (None: every other one); (revoked, left)."""
        ...


class EnginePort(Protocol):
    """What the core uses of the engine."""

    #: This identity's inbox id, its installation's id (hex), its Ethereum address,
    #: the URL of the XMTP node it talks to, and the D14N gateway's URL (None on V3).
    inbox_id: str
    installation_id: str
    address: str
    api_url: str
    gateway_url: str | None

    @property
    def backend(self) -> str:
        """The backend libxmtp runs on: `v3`, or `d14n` through a gateway."""
        ...

    @property
    def groups(self) -> GroupsPort:
        """Group operations."""
        ...

    @property
    def installations(self) -> InstallationsPort:
        """Installation operations."""
        ...

    # --- conversations and messages (libxmtp's database) ---

    async def conversations(self, expected: int = 0) -> list[ListedConversation]:
        """Every DM and group libxmtp holds (`expected`: about how many, which scales
        the listing's time bound)."""
        ...

    async def conversation(self, conversation_id: str) -> ConversationInfo | None:
        """One conversation, or None when libxmtp does not know it."""
        ...

    async def messages_since(
        self, conversation_id: str, inserted_after_ns: int
    ) -> list[RawMessage]:
        """A conversation's messages stamped after `inserted_after_ns`, each once."""
        ...

    def message_pages(
        self, conversation_id: str, inserted_after_ns: int
    ) -> AsyncIterator[list[RawMessage]]:
        """`messages_since` a bounded page at a time, each message once."""
        ...

    async def message_count(self, conversation_id: str) -> int:
        """How many messages libxmtp holds for a conversation."""
        ...

    async def newest_stamps(self) -> NewestStamps | None:
        """Each conversation's newest insert stamp, in one read (None: not read)."""
        ...

    async def own_messages(self, conversation_id: str, inserted_after_ns: int) -> list[RawMessage]:
        """This identity's application messages in a conversation."""
        ...

    def deleted_message_id(self, encoded_content: bytes) -> str | None:
        """The message id a deleteMessage content names, or None."""
        ...

    # --- the network ---

    async def sync_all(self) -> SyncSummary | None:
        """A full sync and what it did (None: not known); Unavailable(sync_failed)
        when it fails."""
        ...

    async def sync_conversation(self, conversation_id: str) -> None:
        """Fetch one conversation's new messages."""
        ...

    async def own_commits_lost(self, conversation_id: str) -> int:
        """How many commits this installation made that libxmtp could not apply here
        (a restored copy meeting the original's commits after its backup)."""
        ...

    async def rotate_keys(self, conversation_id: str) -> None:
        """Publish the key update libxmtp has due in a conversation (a restored copy's);
        returns once it is applied."""
        ...

    async def resolve(self, identifier: str) -> str | None:
        """The inbox id of an address or inbox id, or None when it is not on XMTP."""
        ...

    async def addresses_of(self, inbox_id: str) -> list[str]:
        """The addresses of an inbox ([] when unknown)."""
        ...

    async def find_or_create_dm(self, inbox_id: str) -> ConversationInfo:
        """The DM with an inbox, created if there is none."""
        ...

    async def budgets(self) -> tuple[int, int]:
        """(active installations, identity updates) of this inbox."""
        ...

    def v3_cutover(self) -> bool:
        """Whether the node has refused this client as a V3 client."""
        ...

    def on_switch(self, handler: Callable[[], Awaitable[None]]) -> None:
        """Have `handler` run once libxmtp has moved from V3 to D14N at the cutover
        (`backend` is then `d14n`)."""
        ...

    # --- consent ---

    async def set_consent(
        self, *, conversation_id: str, allowed: bool, peer_inbox_id: str | None = None
    ) -> None:
        """Record consent in XMTP for a conversation (and a DM's peer)."""
        ...

    async def reset_consent(self, *, conversation_id: str, peer_inbox_id: str | None) -> None:
        """Set XMTP's consent records back to unknown."""
        ...

    async def inbox_consent(self, inbox_id: str) -> XmtpConsent:
        """XMTP's consent record for an inbox."""
        ...

    # --- sending ---

    async def prepare(self, conversation_id: str, payload: bytes) -> str:
        """Store an outgoing message unpublished; its id."""
        ...

    async def publish(
        self, conversation_id: str, message_id: str, seen: Callable[[], None] = ...
    ) -> None:
        """Publish a prepared message; harmless to repeat. `seen` as for `send`."""
        ...

    async def send(
        self,
        conversation_id: str,
        payload: bytes,
        prepared: Callable[[str], None],
        seen: Callable[[], None] = ...,
    ) -> str:
        """`prepare` then `publish` in one call; `prepared` learns the id (on another
        thread) before the publication starts; `seen` is called on the loop when the
        node has the message (its echo), mostly before this returns. Returns the id.
        The message stream's echo of the message is not handed to `on_message`
        (cone/engine/publishing.py, the role these three make)."""
        ...

    # --- streams and lifecycle ---

    async def start_streams(
        self,
        *,
        on_message: Callable[[RawMessage], None],
        on_conversation: Callable[[str], None],
        on_consent: Callable[[list[ConsentUpdate]], None],
        on_restart: Callable[[], None],
    ) -> None:
        """Open the message, conversation and consent streams."""
        ...

    def reconnect_streams(self) -> None:
        """Reopen now every stream waiting out its backoff."""
        ...

    def stream_health(self) -> list[StreamHealth]:
        """Health of each stream."""
        ...

    async def release_db(self) -> None:
        """Let go of libxmtp's database so its files can be copied."""
        ...

    async def reconnect_db(self) -> None:
        """Reopen libxmtp's database after `release_db`."""
        ...

    async def close(self) -> None:
        """Stop the streams and release libxmtp's database."""
        ...


__all__ = [
    "Action",
    "ConsentUpdate",
    "ConversationInfo",
    "Details",
    "EnginePort",
    "GroupsPort",
    "InstallationsPort",
    "ListedConversation",
    "Member",
    "NewestStamps",
    "NodeAnswer",
    "NodeProbe",
    "NodeView",
    "RawMessage",
    "Role",
    "StreamHealth",
    "SyncSummary",
    "XmtpConsent",
]
