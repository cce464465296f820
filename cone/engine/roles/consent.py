"""The consent role: XMTP's consent records, and its fake.

`Engine` is the real `Consents` (cone/engine/consent.py, with the echoes of its own
records told apart on the consent stream); `MemoryConsents` keeps the records in its
`MemoryXmtp`, where `MemoryReads.conversation` reads them back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cone.engine.roles.memory import MemoryXmtp
from cone.engine.values import XmtpConsent


class Consents(Protocol):
    """XMTP's consent records for conversations and inboxes."""

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


class MemoryConsents(MemoryXmtp):
    """An in-memory `Consents`: a conversation's record, and its peer's when given."""

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


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[Consents] = MemoryConsents


__all__ = ["Consents", "MemoryConsents"]
