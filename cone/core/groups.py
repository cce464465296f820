"""Groups: create (keyed), members, add, remove, leave, update.

`createGroup` follows the send-key protocol (cone/core/outbox.py):

1. The key and its canonical request are committed before libxmtp makes anything.
2. libxmtp makes the group in its own database only (`create_group_optimistic`),
   tagged with an `app_data` marker derived from the key. A crash before step 3
   finds that group again by its marker, so a key never gets a second group.
3. The group id is recorded with the key, the group is recorded in cone's store as
   accepted, and XMTP's consent record allows it.
4. The members are added: this publishes the group and its welcomes. Adding them
   again is harmless (libxmtp skips members already in it), so a crash before the
   key settles only repeats this step on the next call with the key.

A failure in step 4 (network) is returned as UNAVAILABLE; the key keeps its group and
the caller retries with the same key. Until then the group exists only on this
device: nobody else sees it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from cone import _failpoints
from cone.core.history import ConversationView, History
from cone.engine.port import Action, Identified, Member
from cone.engine.roles.consent import Consents
from cone.engine.roles.groups import WithGroups
from cone.errors import (
    ConeError,
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    unknown_conversation,
)
from cone.store import Connection, Kind, Store, conversations, details
from cone.store import groups as group_keys

log = logging.getLogger(__name__)

_MARKER_PREFIX = "cone.group:"


class GroupRoles(Identified, WithGroups, Consents, Protocol):
    """What the group operations use of the engine."""


@dataclass(frozen=True)
class Created:
    """What CreateGroup returns."""

    group: ConversationView
    deduplicated: bool


def marker(own_inbox_id: str, key: str) -> str:
    """The `app_data` a key's group carries: the key is not readable from it."""
    digest = hashlib.sha256(f"{own_inbox_id}\0{key}".encode()).hexdigest()[:32]
    return _MARKER_PREFIX + digest


class Groups:
    """Group operations for one identity."""

    def __init__(
        self,
        store: Store,
        engine: GroupRoles,
        history: History,
        resolve: Callable[[str], Awaitable[tuple[str, str | None]]],
        on_new_group: Callable[[str], None],
    ) -> None:
        self._store = store
        self._engine = engine
        self._history = history
        self._resolve = resolve
        self._on_new_group = on_new_group

    async def _inboxes(self, members: list[str]) -> list[str]:
        """Inbox ids for members given as addresses, inbox ids or contact names."""
        out: list[str] = []
        for m in members:
            inbox_id, _ = await self._resolve(m)
            if inbox_id != self._engine.inbox_id and inbox_id not in out:
                out.append(inbox_id)
        return out

    async def create(
        self,
        *,
        members: list[str],
        name: str | None,
        description: str | None,
        image_url: str | None,
        key: str,
    ) -> Created:
        """One group per key (see the module docstring)."""
        inboxes = await self._inboxes(members)
        request = json.dumps(
            {"members": sorted(inboxes), "name": name, "description": description,
             "imageUrl": image_url},
            sort_keys=True,
        )  # fmt: skip
        rec, new = await self._store.write(group_keys.claim, key, request, time.time_ns())
        if not new:
            first = json.loads(rec.request)
            if first["members"] != sorted(inboxes):
                raise Conflict(
                    f"key {key!r} was first used to create a group with other members: "
                    "use a new key for a new group",
                    reason="key_conflict",
                    field="key",
                )
            if rec.state == "settled" and rec.group_id:
                return Created(await self._history.one(rec.group_id), deduplicated=True)
            # The first request's metadata wins, as a send key's first payload does.
            name, description, image_url = first["name"], first["description"], first["imageUrl"]
        group_id = rec.group_id
        if group_id is None:
            tag = marker(self._engine.inbox_id, key)
            group_id = await self._engine.groups.find_created(tag)
            if group_id is None:
                group_id = await self._engine.groups.create_local(
                    name=name, description=description, image_url=image_url, app_data=tag
                )
                await _failpoints.reached("group_created")
            await self._store.write(group_keys.set_group, key, group_id)
        await self._store.write(conversations.accept_own, group_id, Kind.GROUP, "", time.time_ns())
        await self._engine.set_consent(conversation_id=group_id, allowed=True)
        if rec.state != "settled":
            await _failpoints.reached("group_recorded")
            try:
                await self._engine.groups.add_members(group_id, inboxes)
            except ConeError as exc:
                await self._store.write(_failed, key, group_id, exc.message)
                raise
            await self._store.write(_settled, key, group_id, time.time_ns())
            self._on_new_group(group_id)
        return Created(await self._history.one(group_id), deduplicated=not new)

    @contextlib.asynccontextmanager
    async def _changing(self, conversation_id: str) -> AsyncIterator[None]:
        """Around a change libxmtp makes to a group: its details are read again
        afterwards, also when the change failed part way or cone stopped during it
        (counted before too, durably), and when a listing read them during it
        (counted after: cone/store/details.py)."""
        await self._store.write(details.changed, [conversation_id])
        try:
            yield
        finally:
            await self._store.write(details.changed, [conversation_id])

    async def _group(self, conversation_id: str) -> None:
        """The conversation must be a group cone records."""
        conv = await self._store.read(conversations.get, conversation_id)
        if conv is None:
            raise unknown_conversation(conversation_id)
        if conv.kind is not Kind.GROUP:
            raise FailedPrecondition(
                f"conversation {conversation_id} is a DM, not a group",
                reason="not_a_group",
                field="conversationId",
            )

    async def members(self, conversation_id: str) -> list[Member]:
        """A group's members."""
        await self._group(conversation_id)
        return await self._engine.groups.members(conversation_id)

    async def add(self, conversation_id: str, members: list[str]) -> list[Member]:
        """Add members (the group's policy permitting); returns the members after."""
        await self._group(conversation_id)
        inboxes = await self._inboxes(members)
        await self._engine.groups.check(conversation_id, Action.ADD_MEMBERS)
        current = {m.inbox_id for m in await self._engine.groups.members(conversation_id)}
        missing = [i for i in inboxes if i not in current]
        if missing:
            async with self._changing(conversation_id):
                await self._engine.groups.add_members(conversation_id, missing)
        return await self._engine.groups.members(conversation_id)

    async def remove(self, conversation_id: str, members: list[str]) -> list[Member]:
        """Remove members (the group's policy permitting); returns the members after."""
        await self._group(conversation_id)
        inboxes = await self._inboxes_to_remove(members)
        await self._engine.groups.check(conversation_id, Action.REMOVE_MEMBERS)
        current = {m.inbox_id for m in await self._engine.groups.members(conversation_id)}
        present = [i for i in inboxes if i in current]
        if present:
            async with self._changing(conversation_id):
                await self._engine.groups.remove_members(conversation_id, present)
        return await self._engine.groups.members(conversation_id)

    async def _inboxes_to_remove(self, members: list[str]) -> list[str]:
        out: list[str] = []
        for m in members:
            inbox_id, _ = await self._resolve(m)
            if inbox_id == self._engine.inbox_id:
                raise InvalidArgument(
                    "members names this identity: use leaveGroup to leave", field="members"
                )
            out.append(inbox_id)
        return out

    async def leave(self, conversation_id: str) -> None:
        """Leave a group; delivery from it ends now."""
        await self._group(conversation_id)
        details = await self._engine.groups.details([conversation_id])
        if conversation_id in details and not details[conversation_id].active:
            raise FailedPrecondition(
                f"this identity is no longer a member of group {conversation_id}",
                reason="not_a_member",
                field="conversationId",
            )
        await self._store.write(group_keys.leave, conversation_id)
        async with self._changing(conversation_id):
            await self._engine.groups.leave(conversation_id)

    async def update(
        self,
        conversation_id: str,
        *,
        name: str | None,
        description: str | None,
        image_url: str | None,
    ) -> ConversationView:
        """Change the given metadata (the group's policy permitting)."""
        await self._group(conversation_id)
        for value, action in (
            (name, Action.UPDATE_NAME),
            (description, Action.UPDATE_DESCRIPTION),
            (image_url, Action.UPDATE_IMAGE),
        ):
            if value is not None:
                await self._engine.groups.check(conversation_id, action)
        async with self._changing(conversation_id):
            await self._engine.groups.update(
                conversation_id, name=name, description=description, image_url=image_url
            )
        return await self._history.one(conversation_id)


def _failed(conn: Connection, key: str, group_id: str, error: str) -> None:
    group_keys.fail(conn, key, error)
    details.changed(conn, [group_id])  # the members added before the failure show


def _settled(conn: Connection, key: str, group_id: str, now_ns: int) -> None:
    group_keys.settle(conn, key, now_ns)
    details.changed(conn, [group_id])  # its members are in: its details are read again
