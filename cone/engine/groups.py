"""Groups and conversation details, over libxmtp 1.10.

Part of the engine (the only importer of xmtp-bindings). Every libxmtp call here goes
through the engine's `Calls` (off the loop, bounded, translated), reading libxmtp's
group-state refusals (`_errors.group_refusal`) first.

libxmtp reports a change a group's policy refuses only as a generic sync error (the
reason, `InsufficientPermissions`, goes to its log), so each change is checked
against the group's permission policy first and refused with a clear reason.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.engine._calls import LOCAL_CALL_S, NETWORK_CALL_S, Calls
from cone.engine._convert import every_conversation, find
from cone.engine._errors import group_refusal
from cone.engine.values import Action, Details, Member, Role
from cone.errors import ConeError, FailedPrecondition, unknown_conversation

_ACTION_WORDS = {
    Action.ADD_MEMBERS: "add members",
    Action.REMOVE_MEMBERS: "remove members",
    Action.UPDATE_NAME: "change the name",
    Action.UPDATE_DESCRIPTION: "change the description",
    Action.UPDATE_IMAGE: "change the image",
}


def _settings(conv: Any) -> tuple[int, int] | None:
    s = conv.conversation_message_disappearing_settings()
    if s is None or s.in_ns <= 0:
        return None
    return int(s.from_ns), int(s.in_ns)


def _details(conv: Any) -> Details:
    is_group = conv.conversation_type() == ffi.FfiConversationType.GROUP
    return Details(
        id=bytes(conv.id()).hex(),
        is_group=is_group,
        active=bool(conv.is_active()),
        name=conv.group_name() if is_group else None,
        description=conv.group_description() if is_group else None,
        image_url=conv.group_image_url_square() if is_group else None,
    )


def _create_options(
    name: str | None, description: str | None, image_url: str | None, app_data: str
) -> Any:
    return ffi.FfiCreateGroupOptions(
        permissions=None,
        group_name=name,
        group_image_url_square=image_url,
        group_description=description,
        custom_permission_policy_set=None,
        message_disappearing_settings=None,
        app_data=app_data,
    )


class Groups:
    """Group and conversation operations on one libxmtp client."""

    def __init__(
        self,
        client: Any,
        inbox_id: str,
        calls: Calls,
        creating: Callable[[], AbstractContextManager[Callable[[str], None]]],
    ) -> None:
        self._client = client
        self._inbox_id = inbox_id
        self._x = calls.refusing(group_refusal)
        # Told the group `create_local` makes (the message streams, cone/engine/_subscriptions.py).
        self._creating = creating

    async def _conversation(self, conversation_id: str) -> Any:
        return await self._x.call_sync(
            lambda: self._conversation_now(conversation_id), LOCAL_CALL_S, "reading a conversation"
        )

    def _conversation_now(self, conversation_id: str) -> Any:
        conv = find(self._client, conversation_id)
        if conv is None:
            raise unknown_conversation(conversation_id)
        return conv

    async def _group(self, conversation_id: str) -> Any:
        return await self._x.call_sync(
            lambda: self._group_now(conversation_id), LOCAL_CALL_S, "reading a group"
        )

    def _group_now(self, conversation_id: str) -> Any:
        conv = self._conversation_now(conversation_id)
        if conv.conversation_type() != ffi.FfiConversationType.GROUP:
            raise FailedPrecondition(
                f"conversation {conversation_id} is a DM, not a group",
                reason="not_a_group",
                field="conversationId",
            )
        return conv

    # --- details -------------------------------------------------------------------

    async def details(self, conversation_ids: list[str]) -> dict[str, Details]:
        """Details of the conversations libxmtp knows among these (one thread hop)."""

        def read() -> dict[str, Details]:
            out = {}
            for cid in conversation_ids:
                conv = find(self._client, cid)
                try:
                    if conv is not None:
                        out[cid] = _details(conv)
                except ffi.FfiError:
                    continue  # a conversation libxmtp cannot read has no details
            return out

        return await self._x.call_sync(read, LOCAL_CALL_S, "reading conversation details")

    async def addresses(self, inbox_ids: list[str]) -> dict[str, list[str]]:
        """The addresses of these inboxes that libxmtp knows locally (one call)."""
        if not inbox_ids:
            return {}
        try:
            states = await self._x.call(
                lambda: self._client.addresses_from_inbox_id(False, inbox_ids),
                LOCAL_CALL_S,
                "reading addresses",
            )
        except ConeError:
            return {}
        return {s.inbox_id: [i.identifier for i in s.account_identities] for s in states}

    async def member_count(self, conversation_id: str) -> int:
        """How many inboxes are members of a group (libxmtp's local state)."""
        conv = await self._conversation(conversation_id)
        members = await self._x.call(lambda: conv.list_members(), LOCAL_CALL_S, "listing members")
        return len(members)

    async def members(self, conversation_id: str) -> list[Member]:
        """The members of a group with their addresses and roles."""
        conv = await self._group(conversation_id)
        found = await self._x.call(lambda: conv.list_members(), LOCAL_CALL_S, "listing members")
        return sorted(
            (
                Member(
                    inbox_id=m.inbox_id,
                    addresses=[i.identifier for i in m.account_identifiers],
                    role=Role(m.permission_level.value),
                )
                for m in found
            ),
            key=lambda m: (-m.role.value, m.inbox_id),
        )

    async def disappearing(self, conversation_ids: list[str]) -> dict[str, tuple[int, int]]:
        """The disappearing-message settings in force among these conversations (one
        thread hop; only the setting is read, not the details: at 10,000
        conversations the details took seconds)."""

        def read() -> dict[str, tuple[int, int]]:
            out = {}
            for cid in conversation_ids:
                conv = find(self._client, cid)
                try:
                    found = _settings(conv) if conv is not None else None
                except ffi.FfiError:
                    continue  # a conversation libxmtp cannot read has no setting
                if found is not None:
                    out[cid] = found
            return out

        return await self._x.call_sync(read, LOCAL_CALL_S, "reading disappearing settings")

    # --- creating a group, keyed ------------------------------------------------------

    async def find_created(self, app_data: str) -> str | None:
        """The group this identity made locally with this `app_data`, if any: how a
        createGroup key finds its group again after a crash before its record."""

        def scan() -> str | None:
            for item in self._client.conversations().list_groups(every_conversation()):
                conv = item.conversation()
                if conv.app_data() == app_data and conv.added_by_inbox_id() == self._inbox_id:
                    return bytes(conv.id()).hex()
            return None

        return await self._x.call_sync(scan, LOCAL_CALL_S, "looking for a created group")

    async def create_local(
        self, *, name: str | None, description: str | None, image_url: str | None, app_data: str
    ) -> str:
        """Make a group in libxmtp's database only (nothing is published yet); its id."""
        opts = _create_options(name, description, image_url, app_data)

        def create() -> str:
            return bytes(self._client.conversations().create_group_optimistic(opts).id()).hex()

        with self._creating() as made:
            group_id = await self._x.call_sync(create, LOCAL_CALL_S, "creating a group")
            made(group_id)
        return group_id

    # --- changing a group ---------------------------------------------------------------

    def role_of(self, conv: Any, inbox_id: str) -> Role:
        """An inbox's role in a group."""
        if conv.is_super_admin(inbox_id):
            return Role.SUPER_ADMIN
        if conv.is_admin(inbox_id):
            return Role.ADMIN
        return Role.MEMBER

    async def check(self, conversation_id: str, action: Action) -> None:
        """FailedPrecondition(not_permitted) when the group's policy refuses this
        identity the change; FailedPrecondition(not_a_member) once it has left."""

        def decide() -> tuple[Any, Role, bool]:
            conv = self._group_now(conversation_id)
            policy = getattr(conv.group_permissions().policy_set(), action.value)
            return policy, self.role_of(conv, self._inbox_id), bool(conv.is_active())

        policy, role, active = await self._x.call_sync(
            decide, LOCAL_CALL_S, "reading group permissions"
        )
        if not active:
            raise FailedPrecondition(
                f"this identity is no longer a member of group {conversation_id}",
                reason="not_a_member",
                field="conversationId",
            )
        P = ffi.FfiPermissionPolicy
        allowed = (
            policy == P.ALLOW
            or (policy == P.ADMIN and role is not Role.MEMBER)
            or (policy == P.SUPER_ADMIN and role is Role.SUPER_ADMIN)
        )
        if allowed:
            return
        who = {
            P.ADMIN: "only admins and super admins",
            P.SUPER_ADMIN: "only super admins",
            P.DENY: "nobody",
        }.get(policy, "not this identity")
        raise FailedPrecondition(
            f"not permitted: in group {conversation_id} {who} may "
            f"{_ACTION_WORDS[action]}, and this identity is {role.name.lower().replace('_', ' ')}",
            reason="not_permitted",
            field="conversationId",
        )

    async def add_members(self, conversation_id: str, inbox_ids: list[str]) -> list[str]:
        """Add inboxes (publishing the commit and welcomes); the ones newly added."""
        conv = await self._group(conversation_id)
        result = await self._x.call(
            lambda: conv.add_members(inbox_ids), NETWORK_CALL_S, "adding members"
        )
        return sorted(result.added_members)

    async def remove_members(self, conversation_id: str, inbox_ids: list[str]) -> None:
        """Remove inboxes from a group."""
        conv = await self._group(conversation_id)
        await self._x.call(
            lambda: conv.remove_members(inbox_ids), NETWORK_CALL_S, "removing members"
        )

    async def leave(self, conversation_id: str) -> None:
        """Ask to leave a group; its admins' clients remove this inbox."""
        conv = await self._group(conversation_id)
        await self._x.call(lambda: conv.leave_group(), NETWORK_CALL_S, "leaving the group")

    async def update(
        self,
        conversation_id: str,
        *,
        name: str | None,
        description: str | None,
        image_url: str | None,
    ) -> None:
        """Change the given fields of a group's metadata."""
        conv = await self._group(conversation_id)
        if name is not None:
            await self._x.call(
                lambda: conv.update_group_name(name), NETWORK_CALL_S, "renaming the group"
            )
        if description is not None:
            await self._x.call(
                lambda: conv.update_group_description(description),
                NETWORK_CALL_S,
                "changing the group's description",
            )
        if image_url is not None:
            await self._x.call(
                lambda: conv.update_group_image_url_square(image_url),
                NETWORK_CALL_S,
                "changing the group's image",
            )


__all__ = ["Action", "Details", "Groups", "Member", "Role"]
