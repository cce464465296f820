"""What the daemon knows of its JetStream: reachable or not, how far the export is.

One record in the process that hosts the core, read by `/metrics` (the gauges below,
updated as things happen) and by the Status RPC (`cone status`). The export's lag is
cone's own count: the export consumer's pending messages (`consumers` in Status,
`cone_consumer_pending{consumer="jetstream"}` in /metrics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from prometheus_client import Counter, Gauge

from cone.metrics import REGISTRY
from conepb.v1 import cone_pb2 as pb

UP: Final = Gauge(
    "cone_jetstream_up",
    "1 while the daemon's connection to NATS JetStream is up (0 when down or off).",
    registry=REGISTRY,
)
EXPORTED: Final = Counter(
    "cone_jetstream_exported",
    "Messages exported to JetStream (acknowledged by it) since the daemon started.",
    registry=REGISTRY,
)
REPLIES: Final = Counter(
    "cone_jetstream_replies",
    "Workers' sends and replies handled, by outcome (sent, deduplicated, refused).",
    ["outcome"],
    registry=REGISTRY,
)


@dataclass
class JetStreamState:
    """The bridge's state as the daemon reports it."""

    enabled: bool = False
    _reachable: bool = False
    #: The servers, redacted.
    servers: str = ""
    #: The export's consumer in cone.
    consumer: str = ""
    #: Why the bridge is not working now (None: it is).
    error: str | None = None

    @property
    def reachable(self) -> bool:
        """Whether the connection is up."""
        return self._reachable

    @reachable.setter
    def reachable(self, value: bool) -> None:
        self._reachable = value
        UP.set(1 if value else 0)


#: The one state of this process (one daemon, one bridge).
STATE: Final = JetStreamState()

__all__ = ["EXPORTED", "REPLIES", "STATE", "JetStreamState"]


def status_pb() -> pb.JetStreamStatus | None:
    """The bridge's state in this process for the Status RPC, None when it does not
    run (the daemon gives this to its servicer: cone/daemon/runtime.py)."""
    if not STATE.enabled:
        return None
    return pb.JetStreamStatus(
        servers=STATE.servers,
        reachable=STATE.reachable,
        consumer=STATE.consumer,
        error=STATE.error or "",
    )
