"""The daemon's Prometheus metrics: one registry, the metrics recorded as things happen.

Counters and histograms here are recorded in the process that hosts the core: the
gRPC edge records each ConeService call (`cone.daemon.metrics`), the ingest what
enters the inbox (`cone.core.intake.ingest`). What the daemon knows as
state (outbox, streams, network, the healed count kept in the store) is read from
`Status` when `/metrics` is scraped (`cone.facades.http`). Names follow Prometheus'
conventions: `cone_*_total` for counters, `cone_*_seconds` for durations.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY: Final = CollectorRegistry(auto_describe=True)

# Seconds buckets from a millisecond to a long poll's 30 s bound.
_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

INGESTED: Final = Counter(
    "cone_messages_ingested",
    "Messages that entered the inbox since the daemon started (requests included).",
    registry=REGISTRY,
)
UNREADABLE: Final = Counter(
    "cone_messages_unreadable",
    "Messages that entered the inbox unreadable (kept with their reason) since start.",
    registry=REGISTRY,
)
RPCS: Final = Counter(
    "cone_rpcs",
    "ConeService calls answered, by method and gRPC status code.",
    ["method", "code"],
    registry=REGISTRY,
)
RPC_SECONDS: Final = Histogram(
    "cone_rpc_seconds",
    "Time to answer a ConeService call, by method (a long poll's wait included).",
    ["method"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
IN_FLIGHT: Final = Gauge(
    "cone_rpcs_in_flight",
    "ConeService calls being answered now, by method (waiting long polls included).",
    ["method"],
    registry=REGISTRY,
)
SEND_SECONDS: Final = Histogram(
    "cone_send_seconds",
    "Time to answer a send or reply: stored in the outbox and published, or queued.",
    buckets=_BUCKETS,
    registry=REGISTRY,
)
RECEIVE_WAITS: Final = Counter(
    "cone_receive_waits",
    "Receive calls that asked to wait (waitMs > 0) for a first message.",
    registry=REGISTRY,
)
RECEIVE_WAIT_SECONDS: Final = Histogram(
    "cone_receive_wait_seconds",
    "How long receive calls that asked to wait took to answer.",
    buckets=_BUCKETS,
    registry=REGISTRY,
)

__all__ = [
    "INGESTED",
    "IN_FLIGHT",
    "RECEIVE_WAITS",
    "RECEIVE_WAIT_SECONDS",
    "REGISTRY",
    "RPCS",
    "RPC_SECONDS",
    "SEND_SECONDS",
    "UNREADABLE",
]
