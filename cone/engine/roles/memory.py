"""The in-memory XMTP the role fakes share: a tiny network and one libxmtp database.

`MemoryXmtp` holds plain dictionaries: which addresses and inboxes are on the network
(and whether it answers), the conversations libxmtp holds with their messages, and
XMTP's consent records as last set. Each role's fake (`MemoryReads`, `MemorySync`,
`MemoryDirectory`, `MemoryConsents`, `MemoryStreams`, `MemoryGroups`) is behaviour
over it, so a test composing several (tests/support/fake_engine.py) sees one state.
Nothing here imports libxmtp or the core.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from cone.engine.values import ConversationInfo, RawMessage, XmtpConsent
from cone.errors import Unavailable


def hex_id(*parts: str) -> str:
    """A stable 64-hex id made from `parts` (an inbox id's length)."""
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def conversation_id(*parts: str) -> str:
    """A stable 32-hex id made from `parts` (a conversation id's length)."""
    return hex_id("conversation", *parts)[:32]


@dataclass
class MemoryConversation:
    """A conversation libxmtp holds: its record, messages, members and metadata."""

    info: ConversationInfo
    messages: list[RawMessage] = field(default_factory=list)
    members: set[str] = field(default_factory=set)
    app_data: str = ""
    active: bool = True
    name: str | None = None


class MemoryXmtp:
    """One identity's view of an in-memory XMTP network and libxmtp database."""

    def __init__(self, name: str = "me") -> None:
        self.address = "0x" + hex_id("address", name)[:40]
        self.inbox_id = hex_id("inbox", name)
        self.installation_id = hex_id("installation", name)
        # The network: who is on XMTP, and whether it answers.
        self.inbox_by_address: dict[str, str] = {}
        self.addresses_by_inbox: dict[str, list[str]] = {}
        self.online = True
        # libxmtp's database.
        self.held: dict[str, MemoryConversation] = {}
        # XMTP's consent records, as last set.
        self.conversation_consent: dict[str, XmtpConsent] = {}
        self.inbox_consent_records: dict[str, XmtpConsent] = {}
        # Observation: listings asked for, conversations whose messages were read (in
        # turn), newest-stamp reads (and whether they succeed), the streams' handlers.
        self.listings = 0
        self.reads: list[str] = []
        self.stamp_reads = 0
        self.stamps_readable = True
        self.handlers: dict[str, Callable[..., Any]] = {}
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
            self.held[cid] = MemoryConversation(info, members={self.inbox_id, inbox_id})
        return cid

    def group(self, added_by: str, members: list[str]) -> str:
        """libxmtp holds a group another inbox added this one to; its id."""
        cid = conversation_id("group", added_by, *members)
        info = ConversationInfo(cid, True, added_by, XmtpConsent.UNKNOWN)
        self.held[cid] = MemoryConversation(info, members={self.inbox_id, added_by, *members})
        return cid

    def store(self, conversation_id: str, sender: str, payload: bytes) -> RawMessage:
        """An application message stored in a conversation, stamped by the clock (each
        stamp distinct, so that the order is plain)."""
        now = self._last_ns = max(self._last_ns + 1, time.time_ns())
        m = RawMessage(
            id=hex_id("message", conversation_id, str(now)),
            conversation_id=conversation_id,
            sender_inbox_id=sender,
            sent_at_ns=now,
            inserted_at_ns=now,
            content=payload,
            application=True,
        )
        self.held[conversation_id].messages.append(m)
        return m

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
        stored = self.store(conversation_id, sender, b"")
        m = replace(
            stored,
            application=False,
            inserted_at_ns=stored.inserted_at_ns if inserted_at_ns is None else inserted_at_ns,
        )
        self.held[conversation_id].messages[-1] = m
        return m

    def reach(self, doing: str) -> None:
        """Unavailable when the network is down (`online` False)."""
        if not self.online:
            raise Unavailable(f"{doing} failed: the memory network is down")


__all__ = ["MemoryConversation", "MemoryXmtp", "conversation_id", "hex_id"]
