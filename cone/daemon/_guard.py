"""One way for a gRPC interceptor to run a check ahead of each call's handler.

`RuleGuard` (cone/daemon/validation.py) and `DecodeGuard` (cone/daemon/decoding.py)
both answer a request before the servicer sees it; `guarded` rebuilds a unary-request
handler (unary or server-streaming) so that a check is awaited first. A check that
refuses aborts the call on its context; one that returns lets the call go on.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

Check = Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]


def guarded(
    handler: grpc.RpcMethodHandler,
    check: Check,
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler:
    """`handler` with `check(request, context)` awaited before each call.

    `request_deserializer` replaces the handler's own when given. Streamed requests
    (reflection) keep grpc's own handling: the handler comes back unchanged.
    """
    deserialize = request_deserializer or handler.request_deserializer
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await check(request, context)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary,
            request_deserializer=deserialize,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        streaming = handler.unary_stream

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await check(request, context)
            result = streaming(request, context)
            if inspect.isasyncgen(result):
                async for item in result:
                    yield item
            else:
                await result

        return grpc.unary_stream_rpc_method_handler(
            stream,
            request_deserializer=deserialize,
            response_serializer=handler.response_serializer,
        )
    return handler


__all__ = ["guarded"]
