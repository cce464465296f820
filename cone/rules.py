"""The proto's request rules: one check of a request, and the bounds code needs.

The rules are the buf.validate annotations of proto/conepb/v1/cone.proto; protovalidate
checks a request against them. The daemon runs `check` on every ConeService request at
its gRPC edge (`cone.daemon.validation`), so every transport gets the same verdict;
code that needs a bound (the bridge's ack chunks, its attachment reads) reads it from
the descriptor with `field_rules` rather than restating it.

A violation becomes cone's InvalidArgument naming the field in its JSON form
(`reaction.messageId`; an item of a list by the list's name) with a sentence people
read: a field with a `(cone.v1.expect)` option says what a value must look like
instead of its regular expression. A message-level rule (CEL) names the field its id
starts with (`text.exactly_one` → `text`); a oneof names its first member.
"""

from __future__ import annotations

from typing import Any

import protovalidate
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from buf.validate import validate_pb2
from cone.errors import Internal, InvalidArgument
from cone.schema import json_name
from conepb.v1 import cone_pb2, options_pb2

_validator = protovalidate.Validator()


def field_rules(message: str, field: str) -> Any:
    """The buf.validate rules of a cone.v1 field, e.g.
    `field_rules("AckRequest", "message_ids").repeated.max_items`."""
    fd = cone_pb2.DESCRIPTOR.message_types_by_name[message].fields_by_name[field]
    return fd.GetOptions().Extensions[validate_pb2.field]


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


__all__ = ["check", "field_rules"]
