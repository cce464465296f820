"""What every call passes through before its servicer: built into each handler once.

For each method the daemon serves, `edge` composes, in this order: the call metrics
(ConeService's unary methods: cone/daemon/metrics.py), the request's decoding (every
unary-request method: cone/daemon/decoding.py), and the proto's rules (ConeService:
cone/daemon/validation.py). `EdgeServer` stands for the gRPC server while the
generated `add_*_to_server` functions register their handlers, and registers each
handler already wrapped: nothing runs per call to find or build the wrapping, where
three server interceptors rebuilt it on every call.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from cone.daemon._guard import Check, guarded
from cone.daemon.decoding import tolerant, undecodable
from cone.daemon.metrics import timed
from cone.daemon.validation import broken

CONE_PREFIX = "/cone.v1.ConeService/"


def edge(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """`handler` of the full method name `method` (`/cone.v1.ConeService/Send`), with
    what every call of it passes through first."""
    cone = method.startswith(CONE_PREFIX)
    checks: list[Check] = []
    deserialize = None
    if handler.request_deserializer is not None:
        checks.append(undecodable)
        deserialize = tolerant(handler.request_deserializer)
    if cone:
        checks.append(broken)
    if checks:
        handler = guarded(handler, checks, request_deserializer=deserialize)
    if cone and handler.unary_unary is not None:
        handler = timed(method[len(CONE_PREFIX) :], handler)
    return handler


class _Edged(grpc.GenericRpcHandler):
    """A generic handler whose handlers come back through `edge`, each built once."""

    def __init__(self, inner: grpc.GenericRpcHandler) -> None:
        self._inner = inner
        self._built: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = self._inner.service(details)
        if handler is None:
            return None
        built = self._built.get(details.method)
        if built is None or built[0] is not handler:
            built = (handler, edge(details.method, handler))
            self._built[details.method] = built
        return built[1]


class EdgeServer:
    """Registers handlers on `server` through `edge` (pass it where the generated
    code wants a server), and keeps ConeService's. It has no other way of
    registering: one it does not know fails loudly rather than registering a handler
    without its checks."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server
        #: ConeService's unary handlers as registered, by method name (`Send`): what
        #: a call in the daemon's own process runs (cone/daemon/in_process.py).
        self.cone_unary: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(tuple(_Edged(h) for h in handlers))

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        built = {name: edge(f"/{service}/{name}", h) for name, h in handlers.items()}
        self._server.add_registered_method_handlers(service, built)
        if f"/{service}/".startswith(CONE_PREFIX):
            self.cone_unary.update((n, h) for n, h in built.items() if h.unary_unary is not None)


__all__ = ["CONE_PREFIX", "EdgeServer", "edge"]
