"""Requests that do not decode are INVALID_ARGUMENT with cone's ErrorInfo.

grpc decodes a request before any servicer code runs, and a DecodeError there (invalid
UTF-8 in a string field, a corrupt body) reaches the client as UNKNOWN "Unexpected
<class 'DecodeError'>" without the details the proto promises on every failure. This
interceptor gives each unary-request method a deserializer that never raises and
answers an undecodable request itself, as any other invalid argument is answered.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from cone.errors import InvalidArgument
from cone.grpc_errors import to_status


class _Undecodable:
    """What the tolerant deserializer hands over instead of raising."""

    def __init__(self, why: str) -> None:
        self.why = why


def _tolerant(deserialize: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def decode(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except Exception as exc:  # a client's bytes: answered, never raised into grpc
            return _Undecodable(str(exc) or type(exc).__name__)

    return decode


async def _refuse(context: grpc.aio.ServicerContext, request: _Undecodable) -> None:
    err = InvalidArgument(f"the request does not decode: {request.why}")
    await context.abort_with_status(to_status(err))


class DecodeGuard(grpc.aio.ServerInterceptor):
    """Answers undecodable requests with INVALID_ARGUMENT (reason `invalid_argument`)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.request_deserializer is None:
            return handler
        decode = _tolerant(handler.request_deserializer)
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if isinstance(request, _Undecodable):
                    await _refuse(context, request)
                return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=decode, response_serializer=handler.response_serializer
            )
        if handler.unary_stream is not None:
            streaming = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                if isinstance(request, _Undecodable):
                    await _refuse(context, request)
                result = streaming(request, context)
                if inspect.isasyncgen(result):
                    async for item in result:
                        yield item
                else:
                    await result

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=decode, response_serializer=handler.response_serializer
            )
        return handler  # streamed requests (reflection) keep grpc's own handling


__all__ = ["DecodeGuard"]
