"""Requests that do not decode are INVALID_ARGUMENT with cone's ErrorInfo.

grpc decodes a request before any servicer code runs, and a DecodeError there (invalid
UTF-8 in a string field, a corrupt body) reaches the client as UNKNOWN "Unexpected
<class 'DecodeError'>" without the details the proto promises on every failure. This
interceptor gives each unary-request method a deserializer that never raises and
answers an undecodable request itself, as any other invalid argument is answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from cone.daemon._guard import guarded
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


async def _check(request: Any, context: grpc.aio.ServicerContext) -> None:
    if isinstance(request, _Undecodable):
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
        return guarded(
            handler, _check, request_deserializer=_tolerant(handler.request_deserializer)
        )


__all__ = ["DecodeGuard"]
