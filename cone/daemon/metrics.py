"""Recording every ConeService call at the gRPC edge, for `/metrics` (`cone.metrics`).

`timed` times each unary call and counts it by method and status code, so every
transport (gRPC, JSON-RPC on the socket or stdio, MCP, HTTP) is counted once, where
the call reaches the core. Sends and replies also feed `cone_send_seconds`; receives
that wait feed `cone_receive_waits_total` and `cone_receive_wait_seconds`.
"""

from __future__ import annotations

import time
from typing import Any

import grpc

from cone import metrics

_SENDS = frozenset({"Send", "Reply"})


def _record(method: str, code: str, seconds: float, request: Any) -> None:
    metrics.RPCS.labels(method, code).inc()
    metrics.RPC_SECONDS.labels(method).observe(seconds)
    if method in _SENDS:
        metrics.SEND_SECONDS.observe(seconds)
    elif method == "Receive" and getattr(request, "wait_ms", 0) > 0:
        metrics.RECEIVE_WAITS.inc()
        metrics.RECEIVE_WAIT_SECONDS.observe(seconds)


def timed(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """`handler` of ConeService's unary `method` (its short name, `Send`), timed and
    counted on each call."""
    inner = handler.unary_unary

    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        start = time.perf_counter()
        code = "OK"
        in_flight = metrics.IN_FLIGHT.labels(method)
        in_flight.inc()
        try:
            return await inner(request, context)
        except BaseException:
            code = "CANCELLED"  # replaced below when the context knows better
            raise
        finally:
            in_flight.dec()
            status = context.code()
            if status is not None:
                code = status.name
            _record(method, code, time.perf_counter() - start, request)

    return grpc.unary_unary_rpc_method_handler(
        call,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


__all__ = ["timed"]
