"""RevokeInstallations: this inbox's other installations (XMTP allows 10 per inbox)."""

from __future__ import annotations

from cone.engine.roles.groups import WithInstallations
from cone.errors import InvalidArgument


class Installations:
    """The inbox's installations, as this one manages them."""

    def __init__(self, engine: WithInstallations) -> None:
        self._engine = engine

    async def revoke(
        self, installation_ids: list[str], all_except_this: bool
    ) -> tuple[list[str], int]:
        """Revoke the given installations, or all but this one; (revoked ids, left)."""
        if self._engine.installation_id in installation_ids:
            raise InvalidArgument(
                "installationIds names this installation: cone cannot revoke the "
                "installation it runs on",
                field="installationIds",
            )
        return await self._engine.installations.revoke(
            None if all_except_this else installation_ids
        )


__all__ = ["Installations"]
