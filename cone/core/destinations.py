"""Where a destination leads: the one resolver for send, connect and group members.

A destination is a string an agent or operator gives (`to`, `members`). The first
reading that matches wins:

1. a saved contact name, exactly as saved: `cafe`, `Dee` and `ada` look like hex but
   are names when a contact has them;
2. a conversation id (send only): lowercase hex of any other length than 64, or 64
   hex characters naming a conversation this inbox records;
3. an inbox id: 64 hex characters;
4. an Ethereum address: `0x` and 40 hex characters, in any case.

A name-like string no contact has is NotFound(unknown_destination); a string that is
none of the four (`0x123`, words with spaces) is InvalidArgument(not_a_destination),
and this identity's own inbox is InvalidArgument(own_inbox) for send and connect (a
DM with oneself is never what was meant; group members may name it, and the group
methods say what they do with it). Neither is a rule of the proto (those answer
`invalid_argument` at the gRPC edge): they are what resolving found. How a string
reads is `cone.destination`, which the CLI uses too. docs/messages.md states the same.

An address resolves without the network when cone already knows whose it is: a
saved contact's address, or an address libxmtp's local state gives a DM peer's inbox.
Only an address neither holds is looked up on the network, so a send to a known
address queues in the outbox while the node is down, like any other send.

A send to a name, inbox id or address remembers the DM it went to (`remember_dm`),
so the next send there goes straight to that DM, at the cost of a send to its
conversation id. What is remembered is forgotten (and resolved afresh at the next
send) when a contact is saved, a new conversation arrives (a peer's second DM,
which libxmtp may prefer), the streams restart, cone moves to D14N, or the DM no
longer takes sends as it is (blocked or a request again: resolving accepts it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cone import destination
from cone.engine.port import Identified
from cone.engine.roles.directory import Directory
from cone.engine.roles.groups import WithGroups
from cone.errors import NotFound
from cone.store import ContactRecord, Kind, Store, conversations


class DestinationRoles(Identified, Directory, WithGroups, Protocol):
    """What resolving destinations uses of the engine: lookups, and known addresses."""


@dataclass(frozen=True)
class Destination:
    """A resolved destination: a conversation, or an inbox (with its address when known)."""

    conversation_id: str | None = None
    inbox_id: str | None = None
    address: str | None = None


class Destinations:
    """Resolves destinations against cone's store, libxmtp's local state, then the network."""

    def __init__(self, store: Store, engine: DestinationRoles) -> None:
        self._store = store
        self._engine = engine
        # Where a send to a destination last went: the DM (see the module docstring).
        self._dms: dict[str, str] = {}
        # The saved contact names, read once: most names a send gives (conversation
        # ids that start with a letter) are no contact's, and need no read then.
        self._names: set[str] | None = None

    @staticmethod
    def _dm_key(to: str) -> str:
        # Names are exact; ids and addresses are read in any case.
        return to if destination.is_name(to) else to.lower()

    def known_dm(self, to: str) -> str | None:
        """The DM a send to `to` (a name, inbox id or address) went to, if remembered."""
        return self._dms.get(self._dm_key(to))

    def remember_dm(self, to: str, conversation_id: str) -> None:
        """Remember that a send to `to` goes to the DM `conversation_id`."""
        self._dms[self._dm_key(to)] = conversation_id

    def forget_dm(self, to: str) -> None:
        """Resolve `to` afresh at its next send."""
        self._dms.pop(self._dm_key(to), None)

    def forget(self) -> None:
        """Resolve every destination afresh at its next send (contacts changed, or a
        conversation arrived)."""
        self._dms.clear()
        self._names = None

    async def _contact(self, name: str) -> ContactRecord | None:
        if self._names is None:
            self._names = await self._store.read(conversations.contact_names)
        if name not in self._names:
            return None
        return await self._store.read(conversations.contact_by_name, name)

    async def resolve(
        self, to: str, *, field: str = "to", conversation: bool = True, own: bool = False
    ) -> Destination:
        """Where `to` leads (see the module docstring for the precedence); a
        conversation id is taken only when `conversation` is true, this identity's
        own inbox only when `own` is."""
        found = await self._resolve(to, field, conversation)
        if found.inbox_id == self._engine.inbox_id and not own:
            raise destination.own_inbox(to, field)
        return found

    async def _resolve(self, to: str, field: str, conversation: bool) -> Destination:
        destination.check(to, field)
        if destination.is_name(to):
            contact = await self._contact(to)
            if contact is not None:
                return Destination(inbox_id=contact.inbox_id, address=contact.address)
        lowered = to.lower()
        if destination.is_id(lowered):
            # 64 hex digits are an inbox id unless a recorded conversation has them.
            is_conversation = len(lowered) != destination.INBOX_ID_CHARS
            if not is_conversation:
                is_conversation = await self._store.read(conversations.get, lowered) is not None
            if is_conversation:
                if not conversation:
                    raise NotFound(
                        f"{to} is a conversation id: give an address, an inbox id or a saved "
                        "contact name",
                        reason="unknown_destination",
                        field=field,
                    )
                return Destination(conversation_id=lowered)
            if lowered == self._engine.inbox_id:
                return Destination(inbox_id=lowered)
            return Destination(inbox_id=await self._on_xmtp(lowered, field))
        if destination.is_address(lowered):
            inbox_id = await self._known_address(lowered) or await self._on_xmtp(lowered, field)
            return Destination(inbox_id=inbox_id, address=lowered)
        raise NotFound(
            f"no contact is saved as {to!r}: give an address, an inbox id, a saved contact "
            f"name{' or a conversation id' if conversation else ''}",
            reason="unknown_destination",
            field=field,
        )

    async def inbox(self, to: str, field: str = "to", own: bool = False) -> tuple[str, str | None]:
        """(inbox id, address or None) for an address, inbox id or contact name."""
        found = await self.resolve(to, field=field, conversation=False, own=own)
        assert found.inbox_id is not None
        return found.inbox_id, found.address

    async def _on_xmtp(self, identifier: str, field: str) -> str:
        inbox_id = await self._engine.resolve(identifier)
        if inbox_id is None:
            raise NotFound(f"{identifier} is not on XMTP", reason="not_on_xmtp", field=field)
        return inbox_id

    async def _known_address(self, address: str) -> str | None:
        """The inbox cone already maps `address` to, without the network: this
        identity's own, a saved contact's, else a DM peer's whose addresses libxmtp
        holds locally."""
        if address == self._engine.address.lower():
            return self._engine.inbox_id
        contact = await self._store.read(conversations.contact_by_address, address)
        if contact is not None:
            return contact.inbox_id
        known = await self._store.read(conversations.all_conversations)
        peers = sorted({c.peer_inbox_id for c in known if c.kind is Kind.DM and c.peer_inbox_id})
        for inbox_id, addresses in (await self._engine.groups.addresses(peers)).items():
            if address in (a.lower() for a in addresses):
                return inbox_id
        return None
