"""One schema per core operation, shared by the JSON-RPC facade, the MCP server and the CLI.

Everything here is derived from the proto descriptors of `cone.v1.ConeService`, plus
one overlay table (`_PARAMS`) that adds what proto3 cannot say: which parameters are
required, their ranges and patterns (from `cone.limits`) and a sentence for each.
From that one definition come, for every RPC:

- the JSON-RPC method name (`Send` → `send`) and MCP tool name (`cone_send`);
- the parameter JSON Schema, closed (`additionalProperties: false`), and the result
  JSON Schema;
- `Method.to_request(params)`: validation against that schema (an InvalidArgument
  naming the parameter in its JSON form) and conversion to the request message;
- `Method.to_result(response)`: the response message in JSON form.

The JSON form follows proto3 JSON names (`conversation_id` → `conversationId`) with
three deliberate differences, all mechanical: `data_json` and `content_json` (JSON
text) are `data` and `content` (any JSON value); enums are their short lowercase names
(`CONVERSATION_TYPE_DM` → `dm`); 64-bit integers are JSON numbers. Bytes are base64
strings, as in proto3 JSON; a message-typed parameter is a closed JSON object whose
members have overlay entries of their own (`properties`). Fields without presence are always emitted, so a
result carries `more: false` and `deduplicated: false`; fields with presence (proto3
`optional`, oneof members, messages) only when set. Timestamps are RFC 3339 strings.

Drift guard: a request field without its overlay entry (or an entry naming no field,
or a new RPC without a summary) still works from the proto alone, so the daemon never
fails to start over it, but `drift()` lists it and `tests/facades/test_schema.py`
fails until this module catches up; the same tests check every RPC has its method and
tool.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from cone import limits
from cone.errors import InvalidArgument
from conepb.v1 import cone_pb2 as pb

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
_INTEGER_TYPES = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
}
_UNSIGNED_TYPES = {
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
}


def _hex(doc: str) -> JsonObject:
    return {"pattern": limits.HEX_ID_PATTERN, "maxLength": 128, "description": doc}


def _ids(doc: str, *, at_least: int = 0) -> JsonObject:
    out: JsonObject = {
        "maxItems": limits.ACK_IDS_MAX,
        "items": {"pattern": limits.HEX_ID_PATTERN, "maxLength": 128},
        "description": doc,
    }
    if at_least:
        out["minItems"] = at_least
    return out


_MESSAGE_LIMIT: Final[JsonObject] = {
    "minimum": limits.RECEIVE_LIMIT_MIN,
    "maximum": limits.RECEIVE_LIMIT_MAX,
    "default": limits.RECEIVE_LIMIT_DEFAULT,
    "description": "At most this many messages (1–1000). Default 50.",
}
_WAIT_MS: Final[JsonObject] = {
    "minimum": 0,
    "maximum": limits.WAIT_MS_MAX,
    "default": 0,
    "description": "How long to wait for a first message, in milliseconds (0–30000).",
}
_CONSUMER: JsonObject = {
    "pattern": limits.CONSUMER_PATTERN,
    "maxLength": 64,
    "default": limits.DEFAULT_CONSUMER,
    "description": (
        "The consumer whose receipts apply (1–64 letters, digits, '.', '_', ':' or '-'). "
        "Consumers are independent: each has its own pending set. Default `default`."
    ),
}
_KEY: JsonObject = {
    "required": True,
    "minLength": 1,
    "maxLength": limits.KEY_MAX_CHARS,
    "description": (
        "The send key: one logical message per key (1–256 characters). Reuse the same key "
        "when retrying the same logical message, even if the text was regenerated: a settled "
        "key returns the original messageId with deduplicated true and sends nothing new. "
        "For a reply to an incoming message, `reply:<incoming messageId>` is a good key."
    ),
}
_TEXT: JsonObject = {
    "maxLength": limits.TEXT_MAX_BYTES,
    "description": f"Plain text, at most {limits.TEXT_MAX_BYTES} bytes as UTF-8.",
}
_MARKDOWN: JsonObject = {
    "maxLength": limits.TEXT_MAX_BYTES,
    "description": (
        f"Markdown text, sent as XMTP's markdown content type (apps render it), at most "
        f"{limits.TEXT_MAX_BYTES} bytes as UTF-8."
    ),
}
_DATA: JsonObject = {
    "description": (
        f"Any JSON value, sent as cone's data content type (at most "
        f"{limits.DATA_MAX_BYTES} bytes as JSON)."
    )
}
_BASE64_MAX_CHARS: Final = -(-limits.ATTACHMENT_MAX_BYTES // 3) * 4
_REACTION: JsonObject = {
    "description": (
        "A reaction to an earlier message, sent as XMTP's reaction content type: "
        "{messageId, emoji, action (added or removed; default added), schema (unicode, "
        "shortcode or custom; default unicode)}."
    ),
    "properties": {
        "messageId": {"required": True, **_hex("The messageId of the message reacted to.")},
        "emoji": {
            "required": True,
            "minLength": 1,
            "maxLength": 256,
            "description": "The reaction: an emoji such as 👍 (or a shortcode, or custom).",
        },
        "action": {"default": "added", "description": "added (default) or removed."},
        "schema": {
            "default": "unicode",
            "description": "What emoji holds: unicode (default), shortcode or custom.",
        },
        "referenceInboxId": {
            "maxLength": 256,
            "description": "Ignored when sending: cone names the reacted message's sender.",
        },
    },
}
_ATTACHMENT: JsonObject = {
    "description": (
        f"A file sent inline as XMTP's attachment content type: {{filename, mimeType, "
        f"data (base64)}}, at most {limits.ATTACHMENT_MAX_BYTES} bytes."
    ),
    "properties": {
        "filename": {
            "required": True,
            "maxLength": 1024,
            "description": "The file's name, as the recipient's app shows it.",
        },
        "mimeType": {
            "required": True,
            "minLength": 1,
            "maxLength": 256,
            "description": "The MIME type, such as image/png.",
        },
        "data": {
            "required": True,
            "maxLength": _BASE64_MAX_CHARS,
            "description": (
                f"The file's bytes, base64 (at most {limits.ATTACHMENT_MAX_BYTES} bytes)."
            ),
        },
    },
}
_CONTENT_ONE_OF = "Give exactly one of text, markdown, data, reaction and attachment."
_DESTINATION: JsonObject = {
    "required": True,
    "minLength": 1,
    "maxLength": limits.DESTINATION_MAX_CHARS,
    "description": (
        "An Ethereum address (0x + 40 hex), an inbox id (64 hex), a saved contact name, "
        "or (for send) a conversation id."
    ),
}
_MEMBERS: JsonObject = {
    "required": True,
    "minItems": 1,
    "maxItems": 250,
    "items": {"minLength": 1, "maxLength": limits.DESTINATION_MAX_CHARS},
    "description": "Members: addresses, inbox ids or saved contact names (1–250).",
}

# The overlay: per RPC, per JSON parameter name, the constraints and description the
# proto cannot carry. `required` is lifted into the object's `required` list.
_PARAMS: Final[dict[str, dict[str, JsonObject]]] = {
    "Identity": {},
    "Connect": {
        "to": _DESTINATION,
        "name": {
            "pattern": limits.CONTACT_NAME_PATTERN,
            "maxLength": 64,
            "description": (
                "A name to save the contact under (1–64 letters, digits, '.', '_' or '-', "
                "starting with a letter); later usable as `to`."
            ),
        },
    },
    "Send": {
        "to": _DESTINATION,
        "text": _TEXT,
        "data": _DATA,
        "markdown": _MARKDOWN,
        "reaction": _REACTION,
        "attachment": _ATTACHMENT,
        "key": _KEY,
        "replyTo": _hex(
            "The messageId of an earlier message this one replies to (with text, markdown or data)."
        ),
    },
    "Reply": {
        "conversationId": {"required": True, **_hex("The conversation to reply in.")},
        "text": _TEXT,
        "key": _KEY,
        "markdown": _MARKDOWN,
        "reaction": _REACTION,
        "attachment": _ATTACHMENT,
        "data": _DATA,
    },
    "Attachment": {
        "messageId": {
            "required": True,
            **_hex("The messageId of a received message with an attachment."),
        },
        "index": {
            "minimum": 0,
            "maximum": 31,
            "default": 0,
            "description": "Which file of a multi remote attachment (0 first). Default 0.",
        },
    },
    "Receive": {
        "consumer": _CONSUMER,
        "limit": _MESSAGE_LIMIT,
        "waitMs": {
            "minimum": 0,
            "maximum": limits.WAIT_MS_MAX,
            "default": 0,
            "description": (
                "How long to wait for a first message, in milliseconds (0–30000). "
                "A long poll may return an empty batch at its deadline."
            ),
        },
        "excludeConversationIds": _ids(
            "Conversations to leave out of this batch, e.g. those a turn is already "
            "processing, so that no competing turn starts in them."
        ),
    },
    "Ack": {
        "messageIds": {
            "required": True,
            **_ids(
                "The messageIds to acknowledge (1–1000), after acting on them. "
                "Idempotent: acknowledging again is harmless.",
                at_least=1,
            ),
        },
        "consumer": _CONSUMER,
    },
    "Requests": {},
    "Accept": {"conversationId": {"required": True, **_hex("The conversation to accept.")}},
    "Block": {"conversationId": {"required": True, **_hex("The conversation to block.")}},
    "Sync": {},
    "Status": {},
    "Peek": {
        "afterSequence": {
            "minimum": 0,
            "description": (
                "Only messages after this inbox sequence (a message's `sequence`, or "
                "`headSequence` of an earlier peek to follow from then on). Default: from "
                "the oldest."
            ),
        },
        "consumer": {
            "pattern": limits.CONSUMER_PATTERN,
            "maxLength": 64,
            "description": (
                "When given, only the messages this consumer has not acknowledged; its "
                "receipts are not touched. Default: every accepted message."
            ),
        },
        "limit": _MESSAGE_LIMIT,
        "waitMs": _WAIT_MS,
    },
    "Conversations": {
        "consent": {"description": "Only conversations in this consent state; all when absent."},
        "type": {"description": "Only direct (dm) or group conversations; all when absent."},
        "limit": {
            "minimum": limits.RECEIVE_LIMIT_MIN,
            "maximum": limits.RECEIVE_LIMIT_MAX,
            "default": limits.RECEIVE_LIMIT_DEFAULT,
            "description": "At most this many conversations (1–1000). Default 50.",
        },
        "cursor": {
            "minLength": 1,
            "maxLength": 200,
            "description": "The cursor of the previous page, to get the next one.",
        },
        "consumer": {
            **_CONSUMER,
            "description": "The consumer whose pending counts are reported. Default `default`.",
        },
    },
    "Messages": {
        "conversationId": {"required": True, **_hex("The conversation whose history to read.")},
        "before": _hex(
            "Only messages before this messageId (exclusive): the previous page. "
            "Newest first unless oldestFirst."
        ),
        "after": _hex(
            "Only messages after this messageId (exclusive): the next page. "
            "Oldest first unless oldestFirst is false."
        ),
        "limit": _MESSAGE_LIMIT,
        "oldestFirst": {
            "description": (
                "The page's order. Default: newest first, or oldest first when only "
                "`after` is given."
            )
        },
    },
    "Contacts": {},
    "CreateGroup": {
        "members": _MEMBERS,
        "name": {"maxLength": 100, "description": "The group's name (at most 100 characters)."},
        "description": {
            "maxLength": 1000,
            "description": "The group's description (at most 1000 characters).",
        },
        "imageUrl": {"maxLength": 2048, "description": "The group's image URL."},
        "key": {
            **_KEY,
            "description": (
                "The key: one group per key (1–256 characters). Reuse it when retrying: "
                "a retry returns the same group with deduplicated true, never a second one."
            ),
        },
    },
    "Members": {"conversationId": {"required": True, **_hex("The group.")}},
    "AddMembers": {
        "conversationId": {"required": True, **_hex("The group.")},
        "members": _MEMBERS,
    },
    "RemoveMembers": {
        "conversationId": {"required": True, **_hex("The group.")},
        "members": _MEMBERS,
    },
    "LeaveGroup": {"conversationId": {"required": True, **_hex("The group to leave.")}},
    "UpdateGroup": {
        "conversationId": {"required": True, **_hex("The group.")},
        "name": {"maxLength": 100, "description": "A new name (at most 100 characters)."},
        "description": {
            "maxLength": 1000,
            "description": "A new description (at most 1000 characters).",
        },
        "imageUrl": {"maxLength": 2048, "description": "A new image URL."},
    },
    "RevokeInstallations": {
        "installationIds": {
            "maxItems": 10,
            "items": {"pattern": limits.HEX_ID_PATTERN, "maxLength": 128},
            "description": (
                "Installation ids (hex) of this inbox to revoke, not this one's. "
                "Give these or allExceptThis."
            ),
        },
        "allExceptThis": {
            "description": "Revoke every installation of this inbox except this one.",
        },
    },
    "Unblock": {
        "conversationId": {
            "required": True,
            **_hex("The blocked conversation to turn back into a request."),
        }
    },
}

# One sentence or three per operation: the JSON-RPC reference and the MCP tool
# descriptions both use these, so they teach the same discipline.
_SUMMARIES: Final[dict[str, str]] = {
    "Identity": (
        "The public identity of this cone: protocol version (check it is 1), inboxId, "
        "address and network. Give the address or inbox id to peers so they can reach you."
    ),
    "Connect": (
        "Find or create the direct conversation with an address, inbox id or contact name, "
        "accept it and save the contact (optionally under a name)."
    ),
    "Send": (
        "Send one logical message (text, markdown, JSON data, a reaction or a file) to an "
        "address, inbox id, contact name or conversation id. The key makes it safe to "
        "retry: use the same key for the same logical message and nothing is sent twice. "
        + _CONTENT_ONE_OF
    ),
    "Reply": (
        "Reply in an accepted conversation (use the conversationId of a received message) "
        "with text, markdown, JSON data, a reaction or a file. Use a stable key such as "
        "`reply:<incoming messageId>` and reuse it when retrying, even with regenerated "
        "text. " + _CONTENT_ONE_OF
    ),
    "Attachment": (
        "The bytes of a received attachment that did not come inline with receive (too "
        "large for the batch, or a remote file cone downloaded), with its name, MIME type, "
        "size and SHA-256."
    ),
    "Receive": (
        "Pending messages for a consumer, oldest first, waiting up to waitMs for the first. "
        "Messages stay pending until acknowledged: receive, act on them, then ack their "
        "messageIds. A message may come again after a crash; its messageId is the "
        "deduplication key. An empty batch at the deadline is normal."
    ),
    "Ack": (
        "Acknowledge messages for a consumer once you have acted on them, so they are not "
        "received again. Idempotent."
    ),
    "Requests": (
        "Conversations from unknown senders, held as requests: identities only, never "
        "content. Accept one to let its messages into receive, or block it."
    ),
    "Accept": "Accept a conversation held as a request: its pending and future messages enter receive.",
    "Block": (
        "Block a conversation; for a direct conversation, also the peer everywhere, "
        "including their messages inside accepted groups."
    ),
    "Sync": "Fetch conversations, messages and consent from the network now. Fails rather than pretend.",
    "Status": (
        "Operator health report: streams, last sync, inbox and outbox, consumers, and the "
        "identity's installation and update budgets."
    ),
    "Peek": (
        "Read messages of accepted conversations without touching any receipt (nothing is "
        "acknowledged or counted as delivered), e.g. to watch the inbox. To follow, pass "
        "the last message's sequence (or headSequence) as afterSequence."
    ),
    "Conversations": (
        "The conversations this identity is part of, newest first (by createdAt, when "
        "this cone first saw each), a page at a time (pass "
        "the returned cursor for the next page): type, consent, the peer or the group's "
        "name and members, last message time and pending count."
    ),
    "Messages": (
        "Read back an accepted conversation's history, including your own sent messages "
        "(own: true) and messages already acknowledged. Page with before/after a messageId. "
        "Reading history changes nothing: it does not receive or acknowledge."
    ),
    "Contacts": "The saved contacts: name, inbox id, address and the direct conversation.",
    "CreateGroup": (
        "Create a group with members (addresses, inbox ids or contact names), accepted. "
        "Requires a key: a retry with the same key returns the same group, never a second."
    ),
    "Members": "A group's members: inbox id, addresses and role (member, admin, super_admin).",
    "AddMembers": "Add members to a group, if the group's permissions let you.",
    "RemoveMembers": "Remove members from a group, if the group's permissions let you (by default admins only).",
    "LeaveGroup": "Leave a group. Its messages stop entering receive at once.",
    "UpdateGroup": "Change a group's name, description or image URL, if its permissions let you.",
    "RevokeInstallations": (
        "Revoke other installations of this identity's inbox (XMTP allows 10), by id or "
        "all except this one. For operators: `status` reports the count."
    ),
    "Unblock": (
        "Undo a block: the conversation becomes a request again (accept it to let its "
        "messages in); for a direct conversation, the peer is unblocked everywhere."
    ),
}
# RPCs the JSON surfaces do not offer, with the reason; every other RPC is a method
# and a tool (a test holds this).
NOT_EXPOSED: Final[dict[str, str]] = {
    "Backup": "a server stream of file bytes: use `cone backup`, not a JSON call",
}
# Operations for operators rather than agents (documented as such).
OPERATOR_RPCS: Final = frozenset({"Status", "RevokeInstallations"})
# Operations that only read: safe to cancel, to repeat, and cancelled when input closes.
READ_ONLY_RPCS: Final = frozenset(
    {
        "Identity",
        "Receive",
        "Requests",
        "Status",
        "Peek",
        "Attachment",
        "Conversations",
        "Messages",
        "Contacts",
        "Members",
    }
)
# Operations that wait (long polls): cancelled, not awaited, when a session's input ends.
LONG_POLL_RPCS: Final = frozenset({"Receive", "Peek"})
# Content parameters of which the caller must give exactly one (the proto cannot say
# so: Reply's `text` predates its oneof), and the parameter an error names.
_EXACTLY_ONE: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    "Send": (("text", "markdown", "data", "reaction", "attachment"), "text"),
    "Reply": (("text", "markdown", "data", "reaction", "attachment"), "text"),
}


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


_KEYWORDS: Final = frozenset(
    {
        "type",
        "description",
        "default",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "items",
        "enum",
        "format",
        "contentEncoding",
    }
)


# Where the proto and this module's tables disagree (a field or RPC added to the proto
# without its entry here). The facades keep working from the proto alone (such a
# parameter gets its proto type and no limits); `drift()` lists the gaps and a test
# fails on any, so they are closed before release.
_DRIFT: list[str] = []


def _params_schema(rpc: str, desc: Descriptor) -> JsonObject:
    overlay = _PARAMS.get(rpc)
    if overlay is None:
        _DRIFT.append(f"{rpc}: no parameter overlay in cone/schema.py")
        overlay = {}
    names = {json_name(fd): fd for fd in desc.fields}
    for name in sorted(set(overlay) - set(names)):
        _DRIFT.append(f"{rpc}.{name}: in the overlay but not in the proto")
    return _object_schema(rpc, names, overlay)


def _object_schema(
    where: str, names: dict[str, FieldDescriptor], overlay: JsonObject
) -> JsonObject:
    props: JsonObject = {}
    required: list[str] = []
    for name, fd in names.items():
        if name not in overlay:
            _DRIFT.append(f"{where}.{name}: in the proto but not in the overlay")
        extra = dict(overlay.get(name, {"description": f"(see the proto field {fd.name})"}))
        if extra.pop("required", False):
            required.append(name)
        if fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.full_name != _TIMESTAMP:
            inner = {json_name(f): f for f in fd.message_type.fields}
            sub = extra.pop("properties", {})
            for unknown in sorted(set(sub) - set(inner)):
                _DRIFT.append(f"{where}.{name}.{unknown}: in the overlay but not in the proto")
            prop = _object_schema(f"{where}.{name}", inner, sub)
            prop.update(extra)
            props[name] = prop
            continue
        prop = _field_schema(fd)
        if fd.is_repeated:
            items = extra.pop("items", {})
            prop["items"] = {**prop["items"], **items}
        prop.update(extra)
        unknown = set(prop) - _KEYWORDS - {"properties", "required", "additionalProperties"}
        if unknown or set(prop.get("items", {})) - _KEYWORDS:
            raise TypeError(f"{where}.{name}: unsupported schema keywords {sorted(unknown)}")
        props[name] = prop
    schema: JsonObject = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


# ---- validation: the subset of JSON Schema the overlay uses -------------------------


def _python_pattern(pattern: str) -> re.Pattern[str]:
    # ECMA's `$` never matches before a trailing newline; Python's does. Use \Z.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return _python_pattern(pattern)


def _fail(field: str, message: str) -> InvalidArgument:
    return InvalidArgument(message, field=field)


def _check(value: Any, schema: JsonObject, field: str, label: str) -> Any:
    """`value` checked against `schema`; integral floats become ints, base64 strings
    their bytes."""
    kind = schema.get("type")
    if kind == "string" and schema.get("contentEncoding") == "base64":
        return _check_base64(value, schema, field)
    if kind == "object":
        return _check_object(value, schema, field)
    if kind == "string":
        if not isinstance(value, str):
            raise _fail(field, f"{label} must be a string")
        try:
            value.encode()
        except UnicodeEncodeError:
            raise _fail(field, f"{label} must be valid Unicode (no lone surrogates)") from None
        if len(value) < schema.get("minLength", 0):
            raise _fail(field, f"{label} must not be empty")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise _fail(field, f"{label} must be at most {schema['maxLength']} characters")
        if "pattern" in schema and not _compiled(schema["pattern"]).search(value):
            raise _fail(field, f"{label} must match {schema['pattern']}")
        if "enum" in schema and value not in schema["enum"]:
            raise _fail(field, f"{label} must be one of {', '.join(schema['enum'])}")
    elif kind == "integer":
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(field, f"{label} must be an integer")
        if "minimum" in schema and value < schema["minimum"]:
            raise _fail(field, f"{label} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise _fail(field, f"{label} must be at most {schema['maximum']}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise _fail(field, f"{label} must be true or false")
    elif kind == "array":
        if not isinstance(value, list):
            raise _fail(field, f"{label} must be an array")
        if len(value) < schema.get("minItems", 0):
            raise _fail(field, f"{label} must hold at least {schema['minItems']} item(s)")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise _fail(field, f"{label} must hold at most {schema['maxItems']} items")
        items = schema.get("items", {})
        value = [_check(v, items, field, f"{label}[{i}]") for i, v in enumerate(value)]
    elif kind is None:
        _check_json(value, field)
    return value


def _check_base64(value: Any, schema: JsonObject, field: str) -> bytes:
    if not isinstance(value, str):
        raise _fail(field, f"{field} must be a base64 string")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        limit = schema["maxLength"] // 4 * 3
        raise _fail(field, f"{field} is over {limit} bytes (base64: {schema['maxLength']} chars)")
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        raise _fail(field, f"{field} must be base64 (RFC 4648, with padding)") from None


def _check_object(value: Any, schema: JsonObject, field: str) -> JsonObject:
    if not isinstance(value, dict):
        raise _fail(field, f"{field} must be an object")
    props: JsonObject = schema.get("properties", {})
    for name in sorted(value):
        if name not in props:
            known = ", ".join(props)
            raise _fail(f"{field}.{name}", f"unknown member {name!r} of {field} (known: {known})")
    for name in schema.get("required", []):
        if name not in value:
            raise _fail(f"{field}.{name}", f"{field} needs {name!r}")
    return {
        name: _check(v, props[name], f"{field}.{name}", f"{field}.{name}")
        for name, v in value.items()
    }


def _to_message(message: Any, value: JsonObject) -> None:
    """Fill a proto message from a checked JSON object (enums by short name)."""
    fields = {json_name(fd): fd for fd in message.DESCRIPTOR.fields}
    for name, v in value.items():
        fd = fields[name]
        if fd.type == FieldDescriptor.TYPE_ENUM:
            numbers = {_enum_value(fd, e.number): e.number for e in fd.enum_type.values}
            setattr(message, fd.name, numbers[v])
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            _to_message(getattr(message, fd.name), v)
        else:
            setattr(message, fd.name, v)


def _check_json(value: Any, field: str) -> None:
    """Any JSON value: encodable as strict JSON."""
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        raise _fail(field, f"{field} must be a JSON value") from None


def _dump_data(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
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
    _fields: dict[str, FieldDescriptor] = field(repr=False, default_factory=dict)

    def to_request(self, params: Mapping[str, Any] | None) -> Any:
        """Check `params` against the schema and build the request message.

        Raises InvalidArgument (JSON-RPC -32602) naming the parameter.
        """
        params = {} if params is None else params
        schema = self.params_schema
        props: JsonObject = schema["properties"]
        for name in sorted(params):
            if name not in props:
                known = ", ".join(props) or "none"
                raise _fail(name, f"unknown parameter {name!r} for {self.name} (known: {known})")
        for name in schema.get("required", []):
            if name not in params:
                raise _fail(name, f"missing parameter {name!r} for {self.name}")
        request = self.request_type()
        for name, prop in props.items():
            if name not in params:
                continue
            value = _check(params[name], prop, name, name)
            fd = self._fields[name]
            if fd.is_repeated:
                getattr(request, fd.name).extend(value)
            elif fd.name in _JSON_TEXT:
                setattr(request, fd.name, _dump_data(value))
            elif fd.type == FieldDescriptor.TYPE_MESSAGE:
                getattr(request, fd.name).SetInParent()
                _to_message(getattr(request, fd.name), value)
            elif fd.type == FieldDescriptor.TYPE_ENUM:
                setattr(request, fd.name, _enum_number(fd, value))
            else:
                setattr(request, fd.name, value)
        if self.rpc in _EXACTLY_ONE:
            members, name = _EXACTLY_ONE[self.rpc]
            if sum(m in params for m in members) != 1:
                raise _fail(name, f"give exactly one of {', '.join(members)}")
        return request

    def to_result(self, response: Any) -> JsonObject:
        """The response message in JSON form (see the module docstring)."""
        return message_to_json(response)

    def timeout(self, request: Any) -> float:
        """The deadline for relaying `request`, in seconds."""
        if self.rpc in LONG_POLL_RPCS:
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
    _DRIFT.append(f"{rpc}: no summary in cone/schema.py")
    return f"The {rpc} operation (see proto/conepb/v1/cone.proto)."


def _build(rpc_desc: Any) -> Method:
    rpc = rpc_desc.name
    req = getattr(pb, rpc_desc.input_type.name)
    resp = getattr(pb, rpc_desc.output_type.name)
    fields = {json_name(fd): fd for fd in req.DESCRIPTOR.fields}
    name = lower_camel(rpc)
    return Method(
        rpc=rpc,
        name=name,
        tool=TOOL_PREFIX + name.lower(),
        summary=_SUMMARIES.get(rpc) or _undocumented(rpc),
        request_type=req,
        response_type=resp,
        params_schema=_params_schema(rpc, req.DESCRIPTOR),
        result_schema=_result_schema(resp.DESCRIPTOR),
        read_only=rpc in READ_ONLY_RPCS,
        long_poll=rpc in LONG_POLL_RPCS,
        operator=rpc in OPERATOR_RPCS,
        _fields=fields,
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
    """Every operation by MCP tool name, in the service's order."""
    return {m.tool: m for m in methods().values()}


__all__ = [
    "LONG_POLL_RPCS",
    "NOT_EXPOSED",
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
