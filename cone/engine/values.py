"""The engine's plain values: what its roles take and give, without libxmtp.

The core, the engine's adapters and the in-memory fakes (cone/engine/roles/) share
them; nothing here calls anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum


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
    """A consent change XMTP reported (from any installation of this inbox). `own`:
    the echo of a record this engine set, which its core recorded before setting it."""

    conversation_id: str | None
    inbox_id: str | None
    consent: XmtpConsent
    own: bool = False


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


__all__ = [
    "Action",
    "ConsentUpdate",
    "ConversationInfo",
    "Details",
    "ListedConversation",
    "Member",
    "NewestStamps",
    "RawMessage",
    "Role",
    "StreamHealth",
    "SyncSummary",
    "XmtpConsent",
]
