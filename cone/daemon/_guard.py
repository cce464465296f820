"""Checks run ahead of each call's handler, built into the handler once.

`guarded` rebuilds a unary-request handler (unary or server-streaming) so that its
checks run first: a check returns the ConeError to answer with (the call is aborted
with its status) or None (the call goes on). The checks are the request's decoding
(cone/daemon/decoding.py) and the proto's rules (cone/daemon/validation.py);
cone/daemon/edge.py applies them, and the call metrics, to every method once, when
the server is built.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc

from cone.errors import ConeError
from cone.grpc_errors import to_status

Check = Callable[[Any], ConeError | None]


def guarded(
    handler: grpc.RpcMethodHandler,
    checks: Sequence[Check],
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler:
    """`handler` with `checks` run, in order, before each call.

    `request_deserializer` replaces the handler's own when given. Streamed requests
    (reflection) keep grpc's own handling: the handler comes back unchanged.
    """
    deserialize = request_deserializer or handler.request_deserializer
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            for check in checks:
                err = check(request)
                if err is not None:
                    await context.abort_with_status(to_status(err))  # raises: the call ends
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary,
            request_deserializer=deserialize,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        streaming = handler.unary_stream

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            for check in checks:
                err = check(request)
                if err is not None:
                    await context.abort_with_status(to_status(err))
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


__all__ = ["Check", "guarded"]
