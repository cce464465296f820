"""The devnet's D14N side wired onto its server: the gateway (PayerApi), the node
(ReplicationApi) and gRPC health, over the V3 side's store and live hubs."""

from __future__ import annotations

from collections.abc import Callable

import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from cone.devnet.envelope_streams import EnvelopeStreams
from cone.devnet.hub import Hub
from cone.devnet.payer_service import PayerService
from cone.devnet.replication_service import ReplicationService
from cone.devnet.stats import Stats
from cone.devnet.store import GroupMessageRow, Store, WelcomeRow
from conepb.xmtpv4 import message_api_pb2_grpc, payer_api_pb2_grpc


async def add_d14n_services(
    server: grpc.aio.Server,
    store: Store,
    groups: Hub[GroupMessageRow],
    welcomes: Hub[WelcomeRow],
    stats: Stats,
    url: Callable[[], str],
) -> None:
    """Serve the D14N gateway and node on the same server and store: libxmtp in D14N
    mode sends PayerApi calls to its gateway URL and the rest to the node GetNodes
    names (this URL again), after a health check."""
    payer_api_pb2_grpc.add_PayerApiServicer_to_server(
        PayerService(store, groups, welcomes, url), server
    )
    streams = EnvelopeStreams(store, groups, welcomes, stats)
    message_api_pb2_grpc.add_ReplicationApiServicer_to_server(
        ReplicationService(store, streams), server
    )
    health = health_aio.HealthServicer()
    for service in ("xmtp.xmtpv4.message_api.ReplicationApi", "xmtp.xmtpv4.payer_api.PayerApi"):
        await health.set(service, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
