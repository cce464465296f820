"""Whether answers from the store may miss what the node holds (`stale`), and why the
network cannot be reached now (an empty receive is then an error)."""

from __future__ import annotations

from cone.core.intake import Intake
from cone.core.network import NetworkWatch
from cone.engine.port import NodeView


class Freshness:
    """The store's answers against the node: the intake's start and last sync, and
    the node's latest answer."""

    def __init__(self, intake: Intake, network: NetworkWatch) -> None:
        self._intake = intake
        self._network = network

    def stale(self) -> bool:
        """Whether answers from the store may miss what the node holds: the start's
        read and first sync are still running, the node does not answer or know this
        identity (its latest answer), or the last sync failed."""
        return (
            self._intake.starting()
            or self._network.view is not NodeView.KNOWS_IDENTITY
            or self._intake.last_sync_error is not None
        )

    def unreachable(self) -> str | None:
        """Why the network cannot be reached now, else None: the last sync failed, or
        the start's first sync has not failed yet but the node does not answer."""
        if not self._intake.network_ok():
            return self._intake.last_sync_error
        if self._intake.starting() and self._network.view is NodeView.NO_ANSWER:
            return self._network.answer.detail
        return None


__all__ = ["Freshness"]
