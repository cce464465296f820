"""The public identity: what the Identity RPC answers and Status repeats."""

from __future__ import annotations

from dataclasses import dataclass

from cone import PROTOCOL_VERSION
from cone.engine.port import EnginePort


@dataclass(frozen=True)
class Identity:
    """The public identity."""

    protocol: int
    inbox_id: str
    address: str
    network: str
    installation_id: str
    backend: str = "v3"


def identity_of(engine: EnginePort, network: str) -> Identity:
    """This identity as the engine has it now (its backend moves at the cutover)."""
    return Identity(
        PROTOCOL_VERSION,
        engine.inbox_id,
        engine.address,
        network,
        engine.installation_id,
        engine.backend,
    )


__all__ = ["Identity", "identity_of"]
