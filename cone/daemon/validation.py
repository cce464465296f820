"""The one check of every request's rules, for every transport, at the gRPC edge.

The rules are the buf.validate annotations of proto/conepb/v1/cone.proto; protovalidate
checks a request against them before any servicer code runs. JSON-RPC and MCP reach
the core through this same server (a relay over the daemon's socket, or the core they
host in-process serving that socket), so every surface gets the same verdict.

A violation becomes cone's InvalidArgument naming the field in its JSON form
(`reaction.messageId`; an item of a list by the list's name) with a sentence people
read: a field with a `(cone.v1.expect)` option says what a value must look like
instead of its regular expression. A message-level rule (CEL) names the field its id
starts with (`text.exactly_one` → `text`); a oneof names its first member.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import protovalidate
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from cone.errors import ConeError, Internal, InvalidArgument
from cone.grpc_errors import to_status
from cone.schema import json_name
from conepb.v1 import options_pb2

log = logging.getLogger(__name__)

_SERVICE_PREFIX = "/cone.v1.ConeService/"
_validator = protovalidate.Validator()


def _expect(fd: FieldDescriptor) -> str | None:
    options = fd.GetOptions()
    if options.HasExtension(options_pb2.expect):
        value: str = options.Extensions[options_pb2.expect]
        return value
    return None


def _sentence(label: str, text: str) -> str:
    return f"{label} {text.removeprefix('value ')}"


def _error(violation: Any, desc: Descriptor) -> InvalidArgument:
    proto = violation.proto
    elements = list(proto.field.elements) if proto.field is not None else []
    if not elements:
        head = proto.rule_id.split(".", 1)[0]
        fd = desc.fields_by_name.get(head)
        return InvalidArgument(proto.message, field=json_name(fd) if fd is not None else None)
    names: list[str] = []
    label: list[str] = []
    fd = None
    current: Descriptor | None = desc
    for element in elements:
        fd = current.fields_by_name.get(element.field_name) if current is not None else None
        if fd is None and current is not None and element.field_name in current.oneofs_by_name:
            members = [json_name(f) for f in current.oneofs_by_name[element.field_name].fields]
            prefix = ".".join([*names, members[0]])
            return InvalidArgument(f"give exactly one of {', '.join(members)}", field=prefix)
        name = json_name(fd) if fd is not None else element.field_name
        names.append(name)
        index = getattr(element.subscript, "value", None) if element.subscript else None
        label.append(f"{name}[{index}]" if index is not None else name)
        current = fd.message_type if fd is not None and fd.message_type is not None else None
    field, where = ".".join(names), ".".join(label)
    expect = _expect(fd) if fd is not None else None
    if expect is not None and proto.rule_id != "required":
        return InvalidArgument(f"{where} must be {expect}", field=field)
    if proto.rule_id == "required":
        return InvalidArgument(f"{where} is required", field=field)
    return InvalidArgument(_sentence(where, proto.message), field=field)


def check(request: Any) -> None:
    """Raise InvalidArgument for the first rule `request` breaks (ConeError `Internal`
    when the rules themselves do not compile)."""
    try:
        violations = _validator.collect_violations(request)
    except (protovalidate.CompilationError, protovalidate.EvaluationError) as exc:
        raise Internal(f"the rules of {request.DESCRIPTOR.full_name} fail: {exc}") from exc
    if violations:
        raise _error(violations[0], request.DESCRIPTOR)


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

        async def refused(request: Any, context: grpc.aio.ServicerContext) -> bool:
            try:
                check(request)
            except ConeError as err:
                await context.abort_with_status(to_status(err))
                return True
            return False

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


__all__ = ["RuleGuard", "check"]
