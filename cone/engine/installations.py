"""This inbox's installations: listing and revoking them (XMTP allows 10 per inbox)."""

from __future__ import annotations

from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.engine._calls import LOCAL_CALL_S, NETWORK_CALL_S, Calls
from cone.errors import NotFound


class Installations:
    """The installations of one libxmtp client's inbox; revocations signed with the wallet."""

    def __init__(self, client: Any, wallet_key: bytes, calls: Calls) -> None:
        self._client = client
        self._wallet_key = wallet_key
        self._x = calls

    async def ids(self) -> list[str]:
        """This inbox's installation ids (hex), from the network."""
        state = await self._x.call(
            lambda: self._client.inbox_state(True), NETWORK_CALL_S, "reading the inbox"
        )
        return [bytes(i.id).hex() for i in state.installations]

    async def revoke(self, installation_ids: list[str] | None) -> tuple[list[str], int]:
        """Revoke these installations (None: every other one), signed with the wallet;
        returns the ids revoked and how many installations are left.
        NotFound(unknown_installation) for an id the inbox does not have."""
        own = bytes(self._client.installation_id()).hex()
        current = await self.ids()
        if installation_ids is None:
            targets = [i for i in current if i != own]
        else:
            unknown = [i for i in installation_ids if i not in current]
            if unknown:
                raise NotFound(
                    f"installation {unknown[0]} is not one of this inbox's installations",
                    reason="unknown_installation",
                    field="installationIds",
                )
            targets = list(dict.fromkeys(installation_ids))
        if not targets:
            return [], len(current)
        request = await self._x.call(
            lambda: self._client.revoke_installations([bytes.fromhex(i) for i in targets]),
            NETWORK_CALL_S,
            "preparing the revocation",
        )
        text = await self._x.call(
            lambda: request.signature_text(), LOCAL_CALL_S, "reading the revocation"
        )
        signature = ffi.ethereum_sign_recoverable(text.encode(), self._wallet_key, True)
        await self._x.call(lambda: request.add_ecdsa_signature(signature), LOCAL_CALL_S, "signing")
        await self._x.call(
            lambda: self._client.apply_signature_request(request),
            NETWORK_CALL_S,
            "publishing the revocation",
        )
        return targets, len(await self.ids())


__all__ = ["Installations"]
