"""One schema per core operation, shared by the JSON-RPC facade, the MCP server and the CLI.

Everything here is derived from `proto/conepb/v1/cone.proto`: its descriptors, its
buf.validate rules, its `(cone.v1.operation)` options and its comments (kept by
tools/genproto.py in `conepb.v1.cone_comments`). No second table. From that one
definition come, for every RPC:

- the JSON-RPC method name (`Send` → `send`) and MCP tool name (`cone_send`), and the
  operation's summary and facts (read-only, long poll, operator);
- the parameter JSON Schema, closed (`additionalProperties: false`), with the rules
  the proto declares (lengths, patterns, ranges, item bounds, required fields) and
  each field's comment as its description; and the result JSON Schema;
- `Method.to_request(params)`: conversion to the request message, refusing only what
  JSON gets wrong (a wrong type, an unknown member) with an InvalidArgument naming the
  parameter; the rules themselves are checked once, by the daemon
  (`cone.daemon.validation`), for every transport;
- `Method.to_result(response)`: the response message in JSON form.

The JSON form follows proto3 JSON names (`conversation_id` → `conversationId`) with
three deliberate differences, all mechanical: `data_json` and `content_json` (JSON
text) are `data` and `content` (any JSON value); enums are their short lowercase names
(`CONVERSATION_TYPE_DM` → `dm`); 64-bit integers are JSON numbers. Bytes are base64
strings, as in proto3 JSON; a message-typed parameter is a closed JSON object. Fields without presence are
always emitted, so a
result carries `more: false` and `deduplicated: false`; fields with presence (proto3
`optional`, oneof members, messages) only when set. Timestamps are RFC 3339 strings.

Drift guard: a request field without a comment or an RPC without a summary still
works, but `drift()` lists it and `tests/facades/test_schema.py` fails; the same tests
check every RPC has its method and tool.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from buf.validate import validate_pb2
from cone.errors import InvalidArgument
from conepb.v1 import cone_pb2 as pb
from conepb.v1 import options_pb2
from conepb.v1.cone_comments import COMMENTS

JsonObject = dict[str, Any]

SERVICE: Final = pb.DESCRIPTOR.services_by_name["ConeService"]
TOOL_PREFIX: Final = "cone_"
# Proto field names whose JSON form differs from the proto3 JSON name.
_RENAMED: Final = {"data_json": "data", "content_json": "content"}
# Repeated fields emitted only when they hold something: content that only some
# messages carry (a multi remote attachment's files), not a list every message has.
_OMIT_EMPTY: Final = frozenset({"cone.v1.Message.attachments"})
# Fields holding JSON text, which the JSON surfaces carry as any JSON value.
_JSON_TEXT: Final = frozenset(_RENAMED)
# Timeouts for relayed calls: a long poll may take its wait plus this margin.
CALL_TIMEOUT_S: Final = 120.0
RECEIVE_MARGIN_S: Final = 30.0

_TIMESTAMP = "google.protobuf.Timestamp"
# Each integer type's range: JSON numbers outside it fit no request.
_INTEGER_BOUNDS: Final = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_INTEGER_TYPES: Final = frozenset(_INTEGER_BOUNDS)
_UNSIGNED_TYPES: Final = frozenset(t for t, (low, _) in _INTEGER_BOUNDS.items() if low == 0)


def _operation(rpc: Any) -> Any:
    return rpc.GetOptions().Extensions[options_pb2.operation]


_OPERATIONS: Final = {rpc.name: _operation(rpc) for rpc in SERVICE.methods}
# RPCs the JSON surfaces do not offer, with the reason; every other RPC is a method
# and a tool (a test holds this).
NOT_EXPOSED: Final[dict[str, str]] = {
    name: op.not_exposed for name, op in _OPERATIONS.items() if op.not_exposed
}
# RPCs JSON-RPC offers but MCP does not offer as tools, with the reason.
NOT_TOOLS: Final[dict[str, str]] = {
    name: op.not_a_tool for name, op in _OPERATIONS.items() if op.not_a_tool
}
# Operations for operators rather than agents (documented as such).
OPERATOR_RPCS: Final = frozenset(name for name, op in _OPERATIONS.items() if op.operator)
# Operations that only read: safe to cancel, to repeat, and cancelled when input closes.
READ_ONLY_RPCS: Final = frozenset(name for name, op in _OPERATIONS.items() if op.read_only)
# Operations that wait (long polls): cancelled, not awaited, when a session's input ends.
LONG_POLL_RPCS: Final = frozenset(name for name, op in _OPERATIONS.items() if op.long_poll)


def lower_camel(name: str) -> str:
    """`SendRequest` → `sendRequest`; RPC names become method names this way."""
    return name[:1].lower() + name[1:]


def json_name(fd: FieldDescriptor) -> str:
    """The JSON name of a field: the proto3 JSON name, with `data_json` as `data`."""
    return _RENAMED.get(fd.name) or fd.json_name


def _is_real_oneof(fd: FieldDescriptor) -> bool:
    """Whether a field belongs to a real oneof (not proto3 `optional`'s synthetic one)."""
    oneof = fd.containing_oneof
    return oneof is not None and not (len(oneof.fields) == 1 and oneof.name == f"_{fd.name}")


def _always_emitted(fd: FieldDescriptor) -> bool:
    if fd.full_name in _OMIT_EMPTY:
        return False
    return fd.is_repeated or not fd.has_presence


def _enum_names(fd: FieldDescriptor) -> list[str]:
    prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", fd.enum_type.name).upper() + "_"
    return [v.name.removeprefix(prefix).lower() for v in fd.enum_type.values if v.number != 0]


def _enum_value(fd: FieldDescriptor, number: int) -> str:
    prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", fd.enum_type.name).upper() + "_"
    value = fd.enum_type.values_by_number.get(number)
    return value.name.removeprefix(prefix).lower() if value is not None else str(number)


def _enum_number(fd: FieldDescriptor, name: str) -> int:
    """The number of an enum value given by its short name (checked against the schema)."""
    prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", fd.enum_type.name).upper() + "_"
    return int(fd.enum_type.values_by_name[prefix + name.upper()].number)


def _scalar_schema(fd: FieldDescriptor) -> JsonObject:
    if fd.name in _JSON_TEXT:
        return {}
    if fd.type == FieldDescriptor.TYPE_STRING:
        return {"type": "string"}
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return {"type": "string", "contentEncoding": "base64"}
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return {"type": "boolean"}
    if fd.type in _INTEGER_TYPES:
        schema: JsonObject = {"type": "integer"}
        if fd.type in _UNSIGNED_TYPES:
            schema["minimum"] = 0
        return schema
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return {"type": "string", "enum": _enum_names(fd)}
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        if fd.message_type.full_name == _TIMESTAMP:
            return {"type": "string", "format": "date-time"}
        return _result_schema(fd.message_type)
    raise TypeError(f"no JSON form for {fd.full_name}")


def _field_schema(fd: FieldDescriptor) -> JsonObject:
    item = _scalar_schema(fd)
    return {"type": "array", "items": item} if fd.is_repeated else item


def _result_schema(desc: Descriptor) -> JsonObject:
    props = {json_name(fd): _field_schema(fd) for fd in desc.fields}
    required = [json_name(fd) for fd in desc.fields if _always_emitted(fd)]
    schema: JsonObject = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


# Where the proto lacks what the JSON surfaces publish: a request field without a
# comment (its description), an RPC without a summary. The facades keep working (the
# gap gets a placeholder); `drift()` lists the gaps and a test fails on any.
_DRIFT: list[str] = []


def _rules(fd: FieldDescriptor) -> Any:
    """The field's buf.validate rules (an empty FieldRules when it has none)."""
    return fd.GetOptions().Extensions[validate_pb2.field]


def _description(fd: FieldDescriptor, where: str) -> str:
    text: str | None = COMMENTS.get(fd.full_name)
    if text is None:
        _DRIFT.append(f"{where}: no comment in proto/conepb/v1/cone.proto")
        return f"(see the proto field {fd.full_name})"
    return text


def _constraints(rules: Any, fd: FieldDescriptor, schema: JsonObject) -> None:
    """Add the JSON Schema keywords that say what `rules` (buf.validate) say."""
    kind = rules.WhichOneof("type")
    if kind == "string":
        s = rules.string
        _keywords(s, schema, min_len="minLength", max_len="maxLength", pattern="pattern")
        if not s.HasField("pattern") and s.HasField("contains"):
            schema["pattern"] = re.escape(s.contains)
        # max_bytes counts UTF-8 bytes, which JSON Schema cannot say: the description does.
    elif kind == "bytes" and rules.bytes.HasField("max_len"):
        schema["maxLength"] = -(-rules.bytes.max_len // 3) * 4  # as base64
    elif kind in _INTEGER_RULES:
        _keywords(getattr(rules, kind), schema, gte="minimum", lte="maximum")
    elif kind == "repeated":
        _keywords(rules.repeated, schema, min_items="minItems", max_items="maxItems")
        _constraints(rules.repeated.items, fd, schema["items"])
    if rules.required:
        if fd.is_repeated:
            schema["minItems"] = max(schema.get("minItems", 0), 1)
        elif fd.type == FieldDescriptor.TYPE_STRING:
            schema["minLength"] = max(schema.get("minLength", 0), 1)


def _keywords(rules: Any, schema: JsonObject, **keywords: str) -> None:
    """Each rule of `keywords` that `rules` set, under its JSON Schema keyword."""
    for rule, keyword in keywords.items():
        if rules.HasField(rule):
            schema[keyword] = getattr(rules, rule)


_INTEGER_RULES: Final = frozenset(
    {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64"}
)


def _params_schema(rpc: str, desc: Descriptor) -> JsonObject:
    return _object_schema(rpc, {json_name(fd): fd for fd in desc.fields})


def _object_schema(where: str, names: dict[str, FieldDescriptor]) -> JsonObject:
    """A closed object schema for request fields, from their rules and comments."""
    props: JsonObject = {}
    required: list[str] = []
    for name, fd in names.items():
        rules = _rules(fd)
        if rules.required:
            required.append(name)
        if fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.full_name != _TIMESTAMP:
            inner = {json_name(f): f for f in fd.message_type.fields}
            prop = _object_schema(f"{where}.{name}", inner)
        else:
            prop = _field_schema(fd)
            _constraints(rules, fd, prop)
        prop["description"] = _description(fd, f"{where}.{name}")
        props[name] = prop
    schema: JsonObject = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


# ---- conversion: JSON values into the request message ------------------------------
# Only what JSON itself can get wrong (a wrong type, an unknown member, bad base64, a
# lone surrogate) is refused here; every rule is the daemon's (cone.daemon.validation).


def _fail(field: str, message: str) -> InvalidArgument:
    return InvalidArgument(message, field=field)


def _convert(value: Any, fd: FieldDescriptor, field: str, label: str) -> Any:
    """One JSON value as the field's Python value; integral floats become ints."""
    if fd.name in _JSON_TEXT:
        return _dump_data(value, field)
    kind = fd.type
    if kind == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            raise _fail(field, f"{label} must be a string")
        try:
            value.encode()
        except UnicodeEncodeError:
            raise _fail(field, f"{label} must be valid Unicode (no lone surrogates)") from None
        return value
    if kind == FieldDescriptor.TYPE_BYTES:
        if not isinstance(value, str):
            raise _fail(field, f"{label} must be a base64 string")
        try:
            return base64.b64decode(value, validate=True)
        except (ValueError, binascii.Error):
            raise _fail(field, f"{label} must be base64 (RFC 4648, with padding)") from None
    if kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise _fail(field, f"{label} must be true or false")
        return value
    if kind == FieldDescriptor.TYPE_ENUM:
        names = _enum_names(fd)
        if not isinstance(value, str) or value not in names:
            raise _fail(field, f"{label} must be one of {', '.join(names)}")
        return _enum_number(fd, value)
    if kind in _INTEGER_BOUNDS:
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(field, f"{label} must be an integer")
        low, high = _INTEGER_BOUNDS[kind]
        if not low <= value <= high:
            raise _fail(field, f"{label} must be between {low} and {high}")
        return value
    raise _fail(field, f"{label} has no JSON form")  # messages are handled by _fill


def _fill(message: Any, value: Any, field: str, method: str = "") -> None:
    """Fill a proto message from a JSON object, member by member (`field`: the
    object's path, empty for the params of `method`)."""
    if not isinstance(value, Mapping):
        raise _fail(field, f"{field} must be an object")
    fields = {json_name(fd): fd for fd in message.DESCRIPTOR.fields}
    for name in sorted(value):
        if name not in fields:
            known = ", ".join(fields) or "none"
            where = f"{field}.{name}" if field else name
            noun = f"member {name!r} of {field}" if field else f"parameter {name!r} for {method}"
            raise _fail(where, f"unknown {noun} (known: {known})")
    given: dict[str, str] = {}
    for name, v in value.items():
        fd = fields[name]
        path = f"{field}.{name}" if field else name
        if _is_real_oneof(fd):
            oneof = fd.containing_oneof
            if oneof.name in given:  # a message holds one member: the JSON has two
                members = [json_name(f) for f in oneof.fields]
                first = f"{field}.{members[0]}" if field else members[0]
                raise _fail(first, f"give exactly one of {', '.join(members)}")
            given[oneof.name] = name
        if fd.is_repeated:
            if not isinstance(v, list):
                raise _fail(path, f"{path} must be an array")
            getattr(message, fd.name).extend(
                _convert(item, fd, path, f"{path}[{i}]") for i, item in enumerate(v)
            )
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(message, fd.name).SetInParent()
            _fill(getattr(message, fd.name), v, path)
        else:
            setattr(message, fd.name, _convert(v, fd, path, path))


def _dump_data(value: Any, field: str) -> str:
    """Any JSON value as compact JSON text (strict: no NaN or infinities)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        raise _fail(field, f"{field} must be a JSON value") from None
    try:
        text.encode()
    except UnicodeEncodeError:  # lone surrogates survive only as \u escapes
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _load_data(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None  # the core only stores data it could parse; never break a batch


@dataclass(frozen=True)
class Method:
    """One core operation as the facades see it."""

    rpc: str
    name: str
    tool: str
    summary: str
    request_type: Any
    response_type: Any
    params_schema: JsonObject
    result_schema: JsonObject
    read_only: bool
    long_poll: bool
    operator: bool

    def to_request(self, params: Mapping[str, Any] | None) -> Any:
        """Build the request message from JSON params.

        Raises InvalidArgument (JSON-RPC -32602) naming the parameter when a value has
        the wrong JSON type or a member is unknown; the rules (ranges, patterns,
        required fields) are checked where every transport meets, at the daemon.
        """
        if params is not None and not isinstance(params, Mapping):
            raise _fail("params", "params must be an object")
        request = self.request_type()
        _fill(request, params or {}, "", self.name)
        return request

    def to_result(self, response: Any) -> JsonObject:
        """The response message in JSON form (see the module docstring)."""
        return message_to_json(response)

    def timeout(self, request: Any) -> float:
        """The deadline for relaying `request`, in seconds."""
        if self.long_poll:
            return float(request.wait_ms) / 1000 + RECEIVE_MARGIN_S
        return CALL_TIMEOUT_S


def _converter(fd: FieldDescriptor) -> Any:
    """How one field's value becomes JSON (None: as it is)."""
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        if fd.message_type.full_name == _TIMESTAMP:
            return _timestamp_json
        return message_to_json
    if fd.type == FieldDescriptor.TYPE_ENUM:
        names = {v.number: _enum_value(fd, v.number) for v in fd.enum_type.values}
        return lambda number: names.get(number) or str(number)
    if fd.name in _JSON_TEXT:
        return _load_data
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return _base64
    return None


def _base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _timestamp_json(value: Any) -> str:
    text: str = value.ToJsonString()
    return text


# Per message type: (proto name, JSON name, converter, repeated, has presence).
_Plan = list[tuple[str, str, Any, bool, bool]]
_PLANS: dict[str, _Plan] = {}


def _plan(desc: Descriptor) -> _Plan:
    plan = _PLANS.get(desc.full_name)
    if plan is None:
        # A repeated field in _OMIT_EMPTY is planned with "presence": emitted when set.
        plan = [
            (
                fd.name,
                json_name(fd),
                _converter(fd),
                fd.is_repeated,
                fd.has_presence or fd.full_name in _OMIT_EMPTY,
            )
            for fd in desc.fields
        ]
        _PLANS[desc.full_name] = plan
    return plan


def message_to_json(message: Any) -> JsonObject:
    """A proto message in cone's JSON form."""
    out: JsonObject = {}
    for name, key, convert, repeated, presence in _plan(message.DESCRIPTOR):
        if repeated:
            values = getattr(message, name)
            if values or not presence:
                out[key] = [convert(v) for v in values] if convert else list(values)
        elif not presence or message.HasField(name):
            value = getattr(message, name)
            out[key] = convert(value) if convert else value
    return out


def _undocumented(rpc: str) -> str:
    _DRIFT.append(f"{rpc}: no (cone.v1.operation).summary in proto/conepb/v1/cone.proto")
    return f"The {rpc} operation (see proto/conepb/v1/cone.proto)."


def _build(rpc_desc: Any) -> Method:
    rpc = rpc_desc.name
    req = getattr(pb, rpc_desc.input_type.name)
    resp = getattr(pb, rpc_desc.output_type.name)
    name = lower_camel(rpc)
    operation = _OPERATIONS[rpc]
    return Method(
        rpc=rpc,
        name=name,
        tool=TOOL_PREFIX + name.lower(),
        summary=operation.summary or _undocumented(rpc),
        request_type=req,
        response_type=resp,
        params_schema=_params_schema(rpc, req.DESCRIPTOR),
        result_schema=_result_schema(resp.DESCRIPTOR),
        read_only=operation.read_only,
        long_poll=operation.long_poll,
        operator=operation.operator,
    )


@cache
def methods() -> dict[str, Method]:
    """Every exposed operation by JSON-RPC method name, in the service's order."""
    built = []
    for rpc in SERVICE.methods:
        if rpc.name in NOT_EXPOSED:
            continue
        if rpc.server_streaming or rpc.client_streaming:
            _DRIFT.append(f"{rpc.name}: streams; expose it explicitly or list it in NOT_EXPOSED")
            continue
        built.append(_build(rpc))
    return {m.name: m for m in built}


def drift() -> list[str]:
    """Where the proto has moved on without this module (empty when in step)."""
    methods()
    return list(_DRIFT)


@cache
def tools() -> dict[str, Method]:
    """Every operation offered as an MCP tool, by tool name, in the service's order."""
    return {m.tool: m for m in methods().values() if m.rpc not in NOT_TOOLS}


__all__ = [
    "LONG_POLL_RPCS",
    "NOT_EXPOSED",
    "NOT_TOOLS",
    "OPERATOR_RPCS",
    "READ_ONLY_RPCS",
    "SERVICE",
    "TOOL_PREFIX",
    "JsonObject",
    "Method",
    "drift",
    "json_name",
    "lower_camel",
    "message_to_json",
    "methods",
    "tools",
]
