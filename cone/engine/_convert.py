"""libxmtp's objects as the engine's plain values, and the options its listings take.

The functions that read a libxmtp object run on an offload worker (every accessor may
read libxmtp's database), never on the event loop.
"""

from __future__ import annotations

from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.engine.consent import xmtp_consent
from cone.engine.values import ConsentUpdate, ConversationInfo, ListedConversation, RawMessage


def find(client: Any, conversation_id: str) -> Any | None:
    """libxmtp's conversation for a hex id, or None when it does not know it."""
    try:
        return client.conversation(bytes.fromhex(conversation_id))
    except (ffi.FfiError, ValueError):
        return None


def info(conv: Any) -> ConversationInfo:
    """A conversation's summary: a group's peer is the inbox that added this one."""
    is_group = conv.conversation_type() == ffi.FfiConversationType.GROUP
    peer = conv.dm_peer_inbox_id() if not is_group else conv.added_by_inbox_id()
    return ConversationInfo(
        id=bytes(conv.id()).hex(),
        is_group=is_group,
        peer_inbox_id=peer or "",
        consent=xmtp_consent(conv.consent_state()),
    )


def listed(item: Any) -> ListedConversation:
    """A conversation from libxmtp's listing, with its newest listed message's id: what
    the item holds, no further query of libxmtp's database (`info` makes two)."""
    last = item.last_message()
    return ListedConversation(
        id=bytes(item.conversation().id()).hex(),
        last_message_id=bytes(last.id).hex() if last is not None else "",
    )


def raw(m: Any, conversation_id: str) -> RawMessage:
    """A stored or streamed message, undecoded."""
    return RawMessage(
        id=bytes(m.id).hex(),
        conversation_id=conversation_id,
        sender_inbox_id=m.sender_inbox_id,
        sent_at_ns=m.sent_at_ns,
        inserted_at_ns=m.inserted_at_ns,
        content=bytes(m.content),
        application=m.kind == ffi.FfiConversationMessageKind.APPLICATION,
    )


def consent_updates(records: Any) -> list[ConsentUpdate]:
    """The consent stream's records."""
    updates = []
    for r in records:
        is_conv = r.entity_type == ffi.FfiConsentEntityType.CONVERSATION_ID
        updates.append(
            ConsentUpdate(
                conversation_id=r.entity if is_conv else None,
                inbox_id=None if is_conv else r.entity,
                consent=xmtp_consent(r.state),
            )
        )
    return updates


def every_conversation() -> Any:
    """Listing options for every conversation (one DM per peer)."""
    return ffi.FfiListConversationsOptions(
        created_after_ns=None,
        created_before_ns=None,
        last_activity_before_ns=None,
        last_activity_after_ns=None,
        order_by=None,
        limit=None,
        consent_states=None,
        include_duplicate_dms=False,
    )


def is_dm(conv: Any) -> bool:
    """Whether a libxmtp conversation is a DM."""
    return bool(conv.conversation_type() == ffi.FfiConversationType.DM)


def _listing(**chosen: Any) -> Any:
    """libxmtp's listing options: nothing filtered, ordered or bounded but `chosen`."""
    fields: dict[str, Any] = dict.fromkeys(
        (
            "sent_before_ns", "sent_after_ns", "limit", "delivery_status", "direction",
            "content_types", "exclude_content_types", "exclude_sender_inbox_ids", "sort_by",
            "inserted_after_ns", "inserted_before_ns",
        )
    )  # fmt: skip
    return ffi.FfiListMessagesOptions(**{**fields, **chosen})


def group_updates() -> Any:
    """Listing options for a conversation's group updates alone."""
    return _listing(content_types=[ffi.FfiContentType.GROUP_UPDATED])


def messages_after(*, limit: int | None, inserted_after_ns: int | None) -> Any:
    """Listing options for messages in insertion-stamp order."""
    return _listing(
        limit=limit,
        direction=ffi.FfiDirection.ASCENDING,
        sort_by=ffi.FfiSortBy.INSERTED_AT,
        inserted_after_ns=inserted_after_ns,
    )
