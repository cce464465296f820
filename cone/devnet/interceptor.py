"""The devnet's one edge between handlers and gRPC: faults, timing and error statuses.

Every call passes through here. Injected latency and failures apply before the
handler runs, so a failed call touches no state. Handlers raise `ConeError`
subclasses for bad requests; this is the one place they become gRPC statuses.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio

from cone.devnet.faults import Faults
from cone.devnet.mls_framing import FramingError, parse_protocol_message
from cone.devnet.stats import Stats
from cone.errors import ConeError

SEND_GROUP_MESSAGES = "/xmtp.mls.api.v1.MlsApi/SendGroupMessages"
PUBLISH_CLIENT_ENVELOPES = "/xmtp.xmtpv4.payer_api.PayerApi/PublishClientEnvelopes"


def _group_ids(method: str, request: Any) -> list[bytes]:
    """The groups a SendGroupMessages or PublishClientEnvelopes request writes to
    (unparseable messages skipped: the handler rejects them)."""
    if method == SEND_GROUP_MESSAGES:
        inputs = list(request.messages)
    else:
        inputs = [e.group_message for e in request.envelopes if e.HasField("group_message")]
    ids = []
    for message in inputs:
        try:
            ids.append(parse_protocol_message(message.v1.data).group_id)
        except FramingError:
            continue
    return ids


_Handler = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]


class DevnetInterceptor(grpc.aio.ServerInterceptor):
    """Applies `Faults` and records `Stats` for node methods; maps `ConeError` to a
    status for every method (the control service's too)."""

    def __init__(self, faults: Faults, stats: Stats) -> None:
        self._faults = faults
        self._stats = stats
        # Wrapped handlers by method path, built on a method's first call: building
        # one per call would cost every call an allocation it does not need.
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is None:
            handler = await continuation(handler_call_details)
            if handler is None:
                return handler  # unknown method: grpc answers UNIMPLEMENTED
            wrapped = self._wrapped[method] = self._wrap_handler(method, handler)
        return wrapped

    def _wrap_handler(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        node = method in self._faults.methods  # not the control service: no faults, no stats
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap(method, handler.unary_unary, faults=node, timed=node),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            # A stream's lifetime is not a cost: streams are counted when opened and
            # timed per delivery instead.
            return grpc.unary_stream_rpc_method_handler(
                self._wrap(method, handler.unary_stream, faults=node, timed=False, opened=node),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _wrap(
        self, method: str, inner: _Handler, *, faults: bool, timed: bool, opened: bool = False
    ) -> _Handler:
        injected, stats = self._faults, self._stats

        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if faults:
                await injected.delay(method)
                failure = injected.take_failure(method)
                if failure is None and method in (SEND_GROUP_MESSAGES, PUBLISH_CLIENT_ENVELOPES):
                    failure = injected.take_group_failure(_group_ids(method, request))
                if failure is not None:
                    await context.abort(*failure)
                refusal = injected.cutover_refusal(method)
                if refusal is not None:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, refusal)
            if opened:
                stats.record_stream(method)
            start = time.perf_counter_ns()
            try:
                return await inner(request, context)
            except ConeError as exc:
                await context.abort(exc.grpc_code, exc.message)
            finally:
                if timed:
                    stats.record_call(method, time.perf_counter_ns() - start)

        return call
