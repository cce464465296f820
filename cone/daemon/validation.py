"""The one check of every request's rules, for every transport, at the gRPC edge.

`RuleGuard` runs `cone.rules.check` on each ConeService request before any servicer
code runs. JSON-RPC and MCP reach the core through this same server (a relay over the
daemon's socket, or the core they host in-process serving that socket), and so do the
CLI and the bridge: every surface gets the same verdict.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from cone.errors import ConeError
from cone.grpc_errors import to_status
from cone.rules import check

_SERVICE_PREFIX = "/cone.v1.ConeService/"


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

        async def refused(request: Any, context: grpc.aio.ServicerContext) -> None:
            try:
                check(request)
            except ConeError as err:
                await context.abort_with_status(to_status(err))  # raises: the call ends

        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                await refused(request, context)
                return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            streaming = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                await refused(request, context)
                result = streaming(request, context)
                if inspect.isasyncgen(result):
                    async for item in result:
                        yield item
                else:
                    await result

            return grpc.unary_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


__all__ = ["RuleGuard"]
