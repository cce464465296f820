"""XMTP's consent records: set, reset and read, over libxmtp 1.10.

XMTP keeps consent per conversation and per inbox, synced to this inbox's other
installations. cone's own decision (accepted, requested, blocked) lives in its store;
these records mirror it, and a record from another installation is read back.
"""

from __future__ import annotations

from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.engine._calls import LOCAL_CALL_S, NETWORK_CALL_S, Calls, answered
from cone.engine.values import XmtpConsent
from cone.errors import ConeError


def xmtp_consent(state: Any) -> XmtpConsent:
    """libxmtp's consent state as a value (None: unknown)."""
    return XmtpConsent(state.value) if state is not None else XmtpConsent.UNKNOWN


def records(conversation_id: str, peer_inbox_id: str | None, state: Any) -> list[Any]:
    """libxmtp consent records setting `state` for a conversation and, for a DM, its peer."""
    out = [
        ffi.FfiConsent(
            entity_type=ffi.FfiConsentEntityType.CONVERSATION_ID,
            state=state,
            entity=conversation_id,
        )
    ]
    if peer_inbox_id:
        out.append(
            ffi.FfiConsent(
                entity_type=ffi.FfiConsentEntityType.INBOX_ID, state=state, entity=peer_inbox_id
            )
        )
    return out


class Consent:
    """XMTP's consent records of one libxmtp client."""

    def __init__(self, client: Any, calls: Calls) -> None:
        self._client = client
        self._x = calls

    async def set(self, conversation_id: str, peer_inbox_id: str | None, allowed: bool) -> bool:
        """Allow or deny a conversation (and a DM's peer); whether the conversation's
        record changed. libxmtp tells the consent stream of a changed record only: one
        already so (a conversation this installation made is allowed from the start)
        has no echo, and moves no conversation between the message streams."""
        state = ffi.FfiConsentState.ALLOWED if allowed else ffi.FfiConsentState.DENIED
        changed = records(conversation_id, peer_inbox_id, state)

        async def record() -> bool:
            before = await self._client.get_consent_state(
                ffi.FfiConsentEntityType.CONVERSATION_ID, conversation_id
            )
            await self._client.set_consent_states(changed)
            return bool(before != state)

        answer: bool = await self._x.call(record, LOCAL_CALL_S, "recording consent in XMTP")
        return answer

    async def reset(self, conversation_id: str, peer_inbox_id: str | None) -> None:
        """Set the records of a conversation (and a DM's peer) back to unknown."""
        changed = records(conversation_id, peer_inbox_id, ffi.FfiConsentState.UNKNOWN)
        await self._x.call(
            lambda: self._client.set_consent_states(changed),
            NETWORK_CALL_S,
            "recording consent in XMTP",
        )

    async def of_inbox(self, inbox_id: str) -> XmtpConsent:
        """The record for an inbox; unknown when libxmtp cannot read it."""
        try:
            state = await self._x.call(
                lambda: self._client.get_consent_state(ffi.FfiConsentEntityType.INBOX_ID, inbox_id),
                LOCAL_CALL_S,
                "reading consent",
            )
        except ConeError as err:
            if not answered(err):
                raise  # a stuck call is no answer: the caller tries again
            return XmtpConsent.UNKNOWN
        return xmtp_consent(state)


__all__ = ["Consent", "records", "xmtp_consent"]
