"""Property tests: any line gets exactly one well-formed answer, or none for a valid
notification, and the session keeps serving."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cone.schema import methods

from ._wire import Wire

_METHODS = [*methods(), "nope", "notifications/cancelled", "rpc.discover"]
_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_param_names = st.sampled_from(
    ["to", "text", "data", "key", "replyTo", "conversationId", "consumer", "limit", "waitMs",
     "excludeConversationIds", "messageIds", "name", "requestId", "bogus"]
)  # fmt: skip
_params = st.dictionaries(_param_names, _json, max_size=4) | _json
_ids = (
    st.none()
    | st.integers()
    | st.text(max_size=6)
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
)


@st.composite
def _envelopes(draw: st.DrawFn) -> Any:
    message: dict[str, Any] = {}
    if draw(st.booleans()):
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2]))
    if draw(st.booleans()):
        message["id"] = draw(_ids)
    if draw(st.integers(0, 9)) > 0:
        message["method"] = draw(st.sampled_from(_METHODS) | _json_scalars)
    if draw(st.booleans()):
        message["params"] = draw(_params)
    return message


def _deep(n: int) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":1,"method":"send","params":{"data":' + b"[" * n + b"]" * n + b"}}"
    )


_lines = st.one_of(
    st.binary(max_size=64).map(lambda b: b.replace(b"\n", b"")),
    st.text(max_size=64).map(lambda t: t.replace("\n", "").encode("utf-8", "surrogatepass")),
    _json.map(lambda v: json.dumps(v).encode()),
    _envelopes().map(lambda e: json.dumps(e).encode()),
    st.lists(_envelopes() | _json, max_size=5).map(lambda b: json.dumps(b).encode()),
    st.integers(1, 3000).map(_deep),
    st.integers(1, 3000).map(lambda n: b"[" * n),
)


def _is_valid_notification(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "id" not in value
        and value.get("jsonrpc") == "2.0"
        and isinstance(value.get("method"), str)
        and (value.get("params") is None or isinstance(value["params"], dict | list))
    )


def _expects_answer(line: bytes) -> bool:
    """The reference: which lines JSON-RPC 2.0 says must be answered."""
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=lambda c: 1 / 0)
    except (ValueError, ZeroDivisionError, RecursionError):
        return True
    if isinstance(value, list):
        return not value or not all(_is_valid_notification(v) for v in value)
    return not _is_valid_notification(value)


def _well_formed(answer: Any) -> bool:
    if isinstance(answer, list):
        return bool(answer) and all(_well_formed(a) and not isinstance(a, list) for a in answer)
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0" or "id" not in answer:
        return False
    if ("result" in answer) == ("error" in answer):
        return False
    if "error" in answer:
        error = answer["error"]
        return (
            isinstance(error.get("code"), int)
            and isinstance(error.get("message"), str)
            and isinstance(error.get("data", {}).get("reason"), str)
        )
    return isinstance(answer["result"], dict)


async def _session(lines: list[bytes]) -> tuple[Wire, list[Any]]:
    wire = Wire()
    for line in lines:
        wire.send_raw(line + b"\n")
    wire.request("probe", "identity")
    rest = await wire.close()
    return wire, rest


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_lines, min_size=1, max_size=12))
def test_every_line_gets_one_well_formed_answer_or_none_for_a_notification(
    lines: list[bytes],
) -> None:
    wire, answers = asyncio.run(_session(lines))
    assert all(line.isascii() for line in wire.lines())
    assert all(_well_formed(a) for a in answers), answers
    expected = sum(_expects_answer(line) for line in lines) + 1
    assert len(answers) == expected, (lines, answers)
    assert any(isinstance(a, dict) and a.get("id") == "probe" and "result" in a for a in answers)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(methods())), st.dictionaries(_param_names, _json, max_size=5))
def test_random_params_are_answered_with_a_result_or_a_named_error(
    method: str, params: dict[str, Any]
) -> None:
    async def run() -> list[Any]:
        wire = Wire()
        wire.request(1, method, params)
        return await wire.close()

    (answer,) = asyncio.run(run())
    assert _well_formed(answer)
    if "error" in answer:
        assert answer["error"]["code"] == -32602
        # an unknown parameter given, or a parameter of the method (a rule may name one
        # not given: a required one, or the first of a group that needs one of them)
        named = answer["error"]["data"]["field"].split(".")[0]
        assert named in {*params, *methods()[method].params_schema["properties"]}
