"""The groups role (and this inbox's installations): group operations and details,
and their fakes.

`Engine.groups` is the real `Groups` (cone/engine/groups.py) and
`Engine.installations` the real `Installations` (cone/engine/installations.py);
`MemoryGroups` and `MemoryInstallations` work on a `MemoryXmtp`, where every change
is permitted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cone.engine.roles.memory import MemoryConversation, MemoryXmtp, conversation_id
from cone.engine.values import Action, ConversationInfo, Details, Member, Role, XmtpConsent
from cone.errors import NotFound


class Groups(Protocol):
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


class Installations(Protocol):
    """This inbox's installations (cone/engine/installations.py)."""

    async def revoke(self, installation_ids: list[str] | None) -> tuple[list[str], int]:
        """Revoke these installations (None: every other one); (revoked, left)."""
        ...


class WithGroups(Protocol):
    """An engine's groups, for a part that also uses its other roles."""

    @property
    def groups(self) -> Groups:
        """Group operations."""
        ...


class WithInstallations(Protocol):
    """An engine's installations and its own installation's id."""

    @property
    def installation_id(self) -> str:
        """This installation's id (hex)."""
        ...

    @property
    def installations(self) -> Installations:
        """Installation operations."""
        ...


class MemoryGroups:
    """Groups kept in a `MemoryXmtp`'s conversations; every change is permitted. A
    group's creator (its `peer_inbox_id`) is its super admin."""

    def __init__(self, xmtp: MemoryXmtp) -> None:
        self._x = xmtp

    def _group(self, conversation_id: str) -> MemoryConversation:
        conv = self._x.held.get(conversation_id)
        if conv is None or not conv.info.is_group:
            raise NotFound(f"no group {conversation_id}", reason="unknown_conversation")
        return conv

    async def details(self, conversation_ids: list[str]) -> dict[str, Details]:
        out = {}
        for cid in conversation_ids:
            conv = self._x.held.get(cid)
            if conv is not None:
                out[cid] = Details(cid, conv.info.is_group, conv.active, conv.name, None, None)
        return out

    async def addresses(self, inbox_ids: list[str]) -> dict[str, list[str]]:
        known = self._x.addresses_by_inbox
        return {i: known[i] for i in inbox_ids if i in known}

    async def member_count(self, conversation_id: str) -> int:
        return len(self._group(conversation_id).members)

    async def members(self, conversation_id: str) -> list[Member]:
        conv = self._group(conversation_id)
        return sorted(
            (
                Member(
                    i,
                    self._x.addresses_by_inbox.get(i, []),
                    Role.SUPER_ADMIN if i == conv.info.peer_inbox_id else Role.MEMBER,
                )
                for i in conv.members
            ),
            key=lambda m: (-m.role.value, m.inbox_id),
        )

    async def disappearing(self, conversation_ids: list[str]) -> dict[str, tuple[int, int]]:
        return {}

    async def find_created(self, app_data: str) -> str | None:
        for cid, conv in self._x.held.items():
            if conv.info.is_group and conv.app_data == app_data:
                return cid
        return None

    async def create_local(
        self, *, name: str | None, description: str | None, image_url: str | None, app_data: str
    ) -> str:
        cid = conversation_id("group", app_data)
        info = ConversationInfo(cid, True, self._x.inbox_id, XmtpConsent.UNKNOWN)
        self._x.held[cid] = MemoryConversation(
            info, members={self._x.inbox_id}, app_data=app_data, name=name
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
        conv.members.discard(self._x.inbox_id)
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


class MemoryInstallations:
    """This inbox's installations as a list, this one first."""

    def __init__(self, installation_id: str) -> None:
        self.ids = [installation_id]

    async def revoke(self, installation_ids: list[str] | None) -> tuple[list[str], int]:
        targets = self.ids[1:] if installation_ids is None else list(installation_ids)
        self.ids = [i for i in self.ids if i not in targets]
        return targets, len(self.ids)


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[Groups] = MemoryGroups
    _1: type[Installations] = MemoryInstallations


__all__ = [
    "Groups",
    "Installations",
    "MemoryGroups",
    "MemoryInstallations",
    "WithGroups",
    "WithInstallations",
]
