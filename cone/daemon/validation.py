"""The one check of every request's rules, for every transport, at the gRPC edge.

`RuleGuard` runs `cone.rules.check` on each ConeService request before any servicer
code runs. JSON-RPC and MCP reach the core through this same server (a relay over the
daemon's socket, or the core they host in-process serving that socket), and so do the
CLI and the bridge: every surface gets the same verdict.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from cone.daemon._guard import guarded
from cone.errors import ConeError
from cone.grpc_errors import to_status
from cone.rules import check

_SERVICE_PREFIX = "/cone.v1.ConeService/"


async def _refuse_broken(request: Any, context: grpc.aio.ServicerContext) -> None:
    try:
        check(request)
    except ConeError as err:
        await context.abort_with_status(to_status(err))  # raises: the call ends


class RuleGuard(grpc.aio.ServerInterceptor):
    """Refuses a ConeService request that breaks its proto's rules (INVALID_ARGUMENT)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or not details.method.startswith(_SERVICE_PREFIX):
            return handler
        return guarded(handler, _refuse_broken)


__all__ = ["RuleGuard"]
