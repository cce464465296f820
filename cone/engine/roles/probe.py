"""The node probe role: whether the XMTP node answers and knows this identity, and
its fake.

`Engine.node_probe` makes the real `Probe` (cone/engine/_node.py: two reads over a
gRPC channel of its own, no libxmtp); `MemoryNode` answers what a test sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol


class NodeView(Enum):
    """What the node said to one probe."""

    KNOWS_IDENTITY = "reachable"
    IDENTITY_UNKNOWN = "identity_unknown"
    NO_ANSWER = "unreachable"


@dataclass(frozen=True)
class NodeAnswer:
    """One probe's result; `detail` says what was seen (for status and the log)."""

    view: NodeView
    detail: str


class Probe(Protocol):
    """Asks one network's node about one identity."""

    async def ask(self, timeout: float) -> NodeAnswer:
        """Ask the node now; answers within `timeout` seconds, whatever the node does."""
        ...

    async def close(self) -> None:
        """Close what the probe opened."""
        ...


class Probes(Protocol):
    """Makes probes for this identity."""

    def node_probe(self, gateway_url: str | None) -> Probe:
        """A probe of the node at the API URL, or (D14N) of the node `gateway_url` names."""
        ...


class MemoryNode:
    """An in-memory node: every probe answers `answer`; `gateways` lists the gateway
    each probe was made for, `asked` counts the questions, `closed` the closings."""

    def __init__(self, answer: NodeAnswer | None = None) -> None:
        self.answer = answer or NodeAnswer(NodeView.KNOWS_IDENTITY, "the memory node knows it")
        self.gateways: list[str | None] = []
        self.asked = 0
        self.closed = 0

    def node_probe(self, gateway_url: str | None) -> Probe:
        self.gateways.append(gateway_url)
        return self

    async def ask(self, timeout: float) -> NodeAnswer:
        self.asked += 1
        return self.answer

    async def close(self) -> None:
        self.closed += 1


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[Probes] = MemoryNode
    _1: type[Probe] = MemoryNode


__all__ = ["MemoryNode", "NodeAnswer", "NodeView", "Probe", "Probes"]
