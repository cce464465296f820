"""The one schema: every RPC has its method and tool, limits are exposed, JSON forms."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from cone.errors import InvalidArgument
from cone.rules import check
from cone.schema import (
    NOT_EXPOSED,
    NOT_TOOLS,
    SERVICE,
    drift,
    message_to_json,
    methods,
    tools,
)
from conepb.v1 import cone_pb2 as pb


def test_every_rpc_has_a_method_and_a_tool_or_a_reason_not_to() -> None:
    rpcs = [m.name for m in SERVICE.methods if m.name not in NOT_EXPOSED]
    assert set(NOT_EXPOSED) <= {m.name for m in SERVICE.methods}
    assert [m.rpc for m in methods().values()] == rpcs
    assert list(methods()) == [r[0].lower() + r[1:] for r in rpcs]
    assert list(tools()) == ["cone_" + r.lower() for r in rpcs if r not in NOT_TOOLS]
    # A request's content is for the operator deciding on it, never a model's tool.
    assert set(NOT_TOOLS) == {"RequestPreview"}


def test_the_schema_is_in_step_with_the_proto() -> None:
    assert drift() == []


def test_the_contract_methods_are_all_there() -> None:
    contract = "identity connect send reply receive ack requests accept block sync".split()
    contract += (
        "conversations messages contacts unblock createGroup addMembers removeMembers "
        "leaveGroup updateGroup members revokeInstallations"
    ).split()  # issue 15
    assert set(contract) <= set(methods())
    assert [m.name for m in methods().values() if m.operator] == [
        "status",
        "revokeInstallations",
        "requestPreview",
    ]


@pytest.mark.parametrize("name", list(methods()))
def test_schemas_are_valid_json_schema_and_params_are_closed(name: str) -> None:
    method = methods()[name]
    jsonschema.Draft202012Validator.check_schema(method.params_schema)
    jsonschema.Draft202012Validator.check_schema(method.result_schema)
    assert method.params_schema["type"] == "object"
    assert method.params_schema["additionalProperties"] is False
    assert method.result_schema["type"] == "object"
    for prop in method.params_schema["properties"].values():
        assert prop.get("description"), name


def test_the_proto_rules_are_in_the_schema() -> None:
    receive = methods()["receive"].params_schema["properties"]
    assert (receive["limit"]["minimum"], receive["limit"]["maximum"]) == (1, 1000)
    assert receive["waitMs"]["maximum"] == 30_000
    assert receive["consumer"]["pattern"] == "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
    send = methods()["send"].params_schema
    assert (send["properties"]["key"]["minLength"], send["properties"]["key"]["maxLength"]) == (
        1,
        256,
    )
    assert send["required"] == ["to", "key"]
    # text counts UTF-8 bytes, which JSON Schema cannot say: no character bound, words.
    assert "maxLength" not in send["properties"]["text"]
    assert "524288 bytes as UTF-8" in send["properties"]["text"]["description"]
    ack = methods()["ack"].params_schema
    assert ack["required"] == ["messageIds"]
    assert (
        ack["properties"]["messageIds"]["minItems"],
        ack["properties"]["messageIds"]["maxItems"],
    ) == (1, 1000)
    assert ack["properties"]["messageIds"]["items"]["pattern"] == "^[0-9a-f]{2,128}$"
    revoke = methods()["revokeInstallations"].params_schema["properties"]
    assert revoke["installationIds"]["maxItems"] == 10
    assert methods()["receive"].long_poll and methods()["receive"].read_only
    assert not methods()["send"].read_only


def test_params_become_the_request_message() -> None:
    send = methods()["send"].to_request(
        {"to": "alice", "data": {"n": [1, 2.5, None]}, "key": "k1", "replyTo": "ab"}
    )
    assert send == pb.SendRequest(
        to="alice", data_json='{"n":[1,2.5,null]}', key="k1", reply_to="ab"
    )
    receive = methods()["receive"].to_request(
        {"limit": 10.0, "waitMs": 0, "excludeConversationIds": ["ab", "cd"]}
    )
    assert receive.HasField("limit") and receive.limit == 10
    assert list(receive.exclude_conversation_ids) == ["ab", "cd"]
    assert not methods()["receive"].to_request(None).HasField("limit")


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("receive", {"waitMs": -1}, "waitMs"),
        ("receive", {"waitMs": 1.5}, "waitMs"),
        ("receive", {"limit": True}, "limit"),
        ("receive", {"excludeConversationIds": ["ab", 3]}, "excludeConversationIds"),
        ("send", {"to": "x", "text": "\ud800", "key": "k"}, "text"),
        ("send", {"to": "x", "data": float("nan"), "key": "k"}, "data"),
        ("send", {"to": "x", "text": "a", "markdown": "b", "key": "k"}, "text"),
        ("send", {"to": "x", "attachment": {"data": "not base64!"}, "key": "k"}, "attachment.data"),
        ("send", {"to": "x", "reaction": {"colour": 1}, "key": "k"}, "reaction.colour"),
        ("ack", {"messageIds": "ab"}, "messageIds"),
        ("block", {"conversationId": 7}, "conversationId"),
    ],
)
def test_json_that_fits_no_request_names_the_parameter(
    method: str, params: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        methods()[method].to_request(params)
    assert caught.value.field == field
    assert caught.value.jsonrpc_code == -32602


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("receive", {"consumer": "ok\n"}, "consumer"),
        ("ack", {"messageIds": ["ab"] * 1001}, "messageIds"),
        ("send", {"to": "", "text": "x", "key": "k"}, "to"),
        ("send", {"to": "x", "key": "k"}, "text"),
        ("reply", {"conversationId": "ab", "key": "k"}, "text"),
        ("block", {}, "conversationId"),
        ("revokeInstallations", {}, "installationIds"),
    ],
)
def test_the_daemons_rule_check_names_the_parameter(
    method: str, params: dict[str, Any], field: str
) -> None:
    request = methods()[method].to_request(params)
    with pytest.raises(InvalidArgument) as caught:
        check(request)
    assert caught.value.field == field
    assert "^" not in caught.value.message  # words, not a regular expression


def test_results_emit_defaults_and_use_the_json_names() -> None:
    sent_at = Timestamp(seconds=1_700_000_000, nanos=5_000_000)
    response = pb.ReceiveResponse(
        messages=[
            pb.Message(
                message_id="ab",
                conversation_id="cd",
                conversation_type=pb.CONVERSATION_TYPE_GROUP,
                sender_inbox_id="ef",
                sent_at=sent_at,
                content_type="xmtp.org/text:1.0",
                text="hi",
                reply_to="01",
                sequence=2**40,
                deliveries=1,
            ),
            pb.Message(message_id="02", data_json='{"a":[true]}'),
        ]
    )
    result = methods()["receive"].to_result(response)
    first, second = result["messages"]
    assert result["more"] is False
    assert first == {
        "messageId": "ab",
        "conversationId": "cd",
        "conversationType": "group",
        "senderInboxId": "ef",
        "sentAt": "2023-11-14T22:13:20.005Z",
        "contentType": "xmtp.org/text:1.0",
        "text": "hi",
        "replyTo": "01",
        "sequence": 2**40,
        "deliveries": 1,
    }
    assert second["data"] == {"a": [True]} and "text" not in second
    sent = message_to_json(pb.SendResponse(message_id="ab", conversation_id="cd"))
    assert sent == {
        "messageId": "ab",
        "conversationId": "cd",
        "deduplicated": False,
        "published": False,
    }


@pytest.mark.parametrize("name", list(methods()))
def test_a_default_response_matches_its_result_schema(name: str) -> None:
    method = methods()[name]
    result = method.to_result(method.response_type())
    jsonschema.validate(result, method.result_schema)
    json.dumps(result, allow_nan=False)


def test_enum_parameters_take_their_short_names() -> None:
    request = methods()["conversations"].to_request({"consent": "blocked", "type": "dm"})
    assert request.consent == pb.CONSENT_STATE_BLOCKED
    assert request.type == pb.CONVERSATION_TYPE_DM
    with pytest.raises(InvalidArgument) as err:
        methods()["conversations"].to_request({"consent": "maybe"})
    assert err.value.field == "consent"


@pytest.mark.parametrize("rpc", [m.name for m in SERVICE.methods])
def test_every_requests_rules_compile(rpc: str) -> None:
    request = getattr(pb, SERVICE.methods_by_name[rpc].input_type.name)()
    try:
        check(request)  # an empty request may break a rule, never fail to compile
    except InvalidArgument as err:
        assert err.field, rpc
