"""A proto message filled from a plain record, by the proto's descriptor.

`compile_fill` reads a message type's descriptor once and returns the function that
fills such a message from a record (a dataclass): each proto field from the record's
field of the same name, a `google.protobuf.Timestamp` `x` from `x_ns` (nanoseconds),
a field of `renamed` from the record field it names, a field of `derived` from a
function of the record (called only when the first record field it reads is set).
A None leaves a field unset, and so does a false flag with presence; a oneof keeps
its first member present; a message-typed field is filled by `nested`'s function
for its type, or copied when the value is a proto message already.

The function is compiled to straight-line Python, as `dataclasses` compiles
`__init__`: the message mapping is the hot path of Receive, Peek and Messages, and
a loop over one step per field took four times as long as the same statements
written out (`Fill.source` shows them). A proto field with no record field to be
filled from is a TypeError when the plan is made (at import); `Fill.reads` names the
record fields read, so a test can hold that every record field reaches the wire.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor

_TIMESTAMP: Final = "google.protobuf.Timestamp"

#: A proto field made by a function of the record: the record fields it reads (the
#: first one set, or the function is not called) and the function.
Derived = tuple[tuple[str, ...], Callable[[Any], object]]


@dataclasses.dataclass(frozen=True)
class Fill:
    """A compiled fill: `fill(out, record)`, the record fields it reads, its source."""

    fill: Callable[[Any, Any], None]
    reads: frozenset[str]
    source: str


def _real_oneof(fd: FieldDescriptor) -> str | None:
    """The name of the real oneof a field belongs to (not proto3 `optional`'s)."""
    oneof = fd.containing_oneof
    if oneof is None or (len(oneof.fields) == 1 and oneof.name == f"_{fd.name}"):
        return None
    return str(oneof.name)


def _statements(
    fd: FieldDescriptor, value: str, env: dict[str, object], nested: Mapping[str, Fill]
) -> list[str]:
    """The statements that set field `fd` of `out` from the expression `value`."""
    name = fd.name
    if fd.message_type is not None and fd.message_type.full_name == _TIMESTAMP:
        # Any int64 time is a valid Timestamp: no range check to make. Setting a field
        # of it marks it present, zero included, as the wire wants.
        return [
            f"v = {value}",
            "if v is not None:",
            f"    t = out.{name}",
            "    t.seconds, t.nanos = divmod(v, 1_000_000_000)",
        ]
    if fd.message_type is not None:
        inner = nested.get(fd.message_type.full_name)
        if inner is None:  # the value is a proto message already
            if fd.is_repeated:
                return [f"v = {value}", "if v:", f"    out.{name}.extend(v)"]
            return [f"v = {value}", "if v is not None:", f"    out.{name}.CopyFrom(v)"]
        env[f"_fill_{name}"] = inner.fill
        if fd.is_repeated:
            return [
                f"v = {value}",
                "if v:",
                f"    add = out.{name}.add",
                "    for x in v:",
                f"        _fill_{name}(add(), x)",
            ]
        # Filled field by field, the message is marked present first (it may stay empty).
        return [
            f"v = {value}",
            "if v is not None:",
            f"    sub = out.{name}",
            "    sub.SetInParent()",
            f"    _fill_{name}(sub, v)",
        ]
    if fd.type == FieldDescriptor.TYPE_BOOL and fd.has_presence:
        return [f"if {value}:", f"    out.{name} = True"]
    oneof = _real_oneof(fd)
    first = oneof is None or fd.containing_oneof.fields[0].name == name
    check = "" if first else f" and out.WhichOneof({oneof!r}) is None"
    return [f"v = {value}", f"if v is not None{check}:", f"    out.{name} = v"]


def compile_fill(
    desc: Descriptor,
    record: type,
    *,
    renamed: Mapping[str, str] | None = None,
    derived: Mapping[str, Derived] | None = None,
    nested: Mapping[str, Fill] | None = None,
) -> Fill:
    """The fill of a `desc` message from a `record` (see the module's docstring);
    `nested` holds the fills of message-typed fields by their type's full name."""
    renamed, derived, nested = renamed or {}, derived or {}, nested or {}
    names = {f.name for f in dataclasses.fields(record)}
    env: dict[str, object] = {}
    reads: set[str] = set()
    body: list[str] = []
    for fd in desc.fields:
        if fd.name in derived:
            sources, make = derived[fd.name]
            env[f"_make_{fd.name}"] = make
            body += [f"if m.{sources[0]}:"]
            body += ["    " + s for s in _statements(fd, f"_make_{fd.name}(m)", env, nested)]
        else:
            source = renamed.get(fd.name, fd.name)
            if fd.message_type is not None and fd.message_type.full_name == _TIMESTAMP:
                source = f"{fd.name}_ns"
            sources = (source,)
            body += _statements(fd, f"m.{source}", env, nested)
        missing = [s for s in sources if s not in names]
        if missing:
            raise TypeError(
                f"{fd.full_name} has no field {missing[0]!r} of {record.__name__} to be"
                " filled from: add the field to the record (and the store's migration),"
                " or say how it is made"
            )
        reads.update(sources)
    source = "def fill(out, m):\n" + "".join(f"    {line}\n" for line in body)
    exec(compile(source, f"<fill {desc.full_name}>", "exec"), env)
    return Fill(cast(Callable[[Any, Any], None], env["fill"]), frozenset(reads), source)


__all__ = ["Derived", "Fill", "compile_fill"]
