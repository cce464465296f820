"""Revoking this inbox's other installations (XMTP allows 10 per inbox)."""

from __future__ import annotations

from cone.engine.roles.groups import WithInstallations
from cone.errors import InvalidArgument


async def revoke(
    engine: WithInstallations, installation_ids: list[str], all_except_this: bool
) -> tuple[list[str], int]:
    """Revoke the given installations, or all but this one; (revoked ids, left)."""
    ids = installation_ids
    if engine.installation_id in ids:
        raise InvalidArgument(
            "installationIds names this installation: cone cannot revoke the installation "
            "it runs on",
            field="installationIds",
        )
    return await engine.installations.revoke(None if all_except_this else ids)
