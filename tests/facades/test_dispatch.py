"""Dispatch: ids, concurrency, notifications, cancellation, batches and errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from cone.errors import NotFound, RateLimited, Unavailable
from cone.facades.jsonrpc import MAX_LINE_BYTES
from cone.facades.jsonrpc._dispatch import MAX_BATCH, Dispatcher
from conepb.v1 import cone_pb2 as pb
from support.waiting import until

from ._wire import Wire


async def now(value: object) -> object:
    return value


async def test_identity_is_answered_while_a_receive_waits() -> None:
    wire = Wire()
    release = asyncio.Event()

    async def slow_receive(request: Any) -> Any:
        await release.wait()
        return pb.ReceiveResponse()

    wire.core.behaviours["Receive"] = slow_receive
    wire.request(1, "receive", {"waitMs": 30000})
    wire.request(2, "identity")
    first = await wire.answer()
    assert first["id"] == 2 and first["result"]["protocol"] == 0
    release.set()
    second = await wire.answer()
    assert second == {"jsonrpc": "2.0", "id": 1, "result": {"messages": [], "more": False}}
    assert await wire.close() == []


async def test_a_notification_is_run_and_never_answered() -> None:
    wire = Wire()
    wire.send({"jsonrpc": "2.0", "method": "ack", "params": {"messageIds": ["ab"]}})
    wire.send({"jsonrpc": "2.0", "method": "no_such_method"})
    wire.send({"jsonrpc": "2.0", "method": "ack", "params": {"bogus": 1}})
    wire.request(1, "identity")
    assert (await wire.answer())["id"] == 1
    assert await wire.close() == []
    assert [rpc for rpc, _ in wire.core.calls] == ["Ack", "Identity"]


async def test_a_cancelled_request_gets_no_answer_and_its_call_stops() -> None:
    wire = Wire()
    started = asyncio.Event()

    async def endless(request: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    wire.core.behaviours["Receive"] = endless
    wire.request("r1", "receive", {"waitMs": 30000})
    await started.wait()
    wire.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "r1"}}
    )
    await wire.core.wait_cancelled("Receive")
    wire.request(2, "identity")
    assert (await wire.answer())["id"] == 2
    assert await wire.close() == []


async def test_cancelling_an_unknown_or_finished_request_is_harmless() -> None:
    wire = Wire()
    wire.request(1, "identity")
    await wire.answer()
    for params in ({"requestId": 1}, {"requestId": 99}, {}, {"requestId": {"x": 1}}, None):
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
        if params is not None:
            message["params"] = params
        wire.send(message)
    wire.request(2, "identity")
    assert (await wire.answer())["id"] == 2
    assert await wire.close() == []


async def test_cancellation_sent_as_a_request_is_an_invalid_request() -> None:
    wire = Wire()
    wire.request(5, "notifications/cancelled", {"requestId": 1})
    answer = await wire.answer()
    assert answer["id"] == 5 and answer["error"]["code"] == -32600


async def test_unparseable_lines_get_32700_with_a_null_id() -> None:
    wire = Wire()
    for raw in [b"{", b"\xff\xfe", b"", b"   ", b'{"a": NaN}', b"[" * 100_000 + b"]" * 100_000]:
        wire.send_raw(raw + b"\n")
    for answer in await wire.answers(6):
        assert answer["id"] is None
        assert answer["error"]["code"] == -32700
        assert answer["error"]["data"]["reason"] == "parse_error"


async def test_invalid_request_objects_get_32600() -> None:
    wire = Wire()
    bad: list[Any] = [
        1,
        "x",
        None,
        {"id": 1, "method": "identity"},
        {"jsonrpc": "1.0", "id": 1, "method": "identity"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": True, "method": "identity"},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "identity"},
        {"jsonrpc": "2.0", "id": 1, "method": "identity", "params": "x"},
        {"jsonrpc": "2.0", "method": 7},
    ]
    for message in bad:
        wire.send(message)
    answers = await wire.answers(len(bad))
    assert [a["error"]["code"] for a in answers] == [-32600] * len(bad)
    assert [a["id"] for a in answers] == [None] * 3 + [1, 1, 1, None, None, 1, None]


async def test_an_unknown_method_is_32601() -> None:
    wire = Wire()
    wire.request(1, "frobnicate")
    answer = await wire.answer()
    assert answer["error"]["code"] == -32601
    assert "identity" in answer["error"]["message"]


async def test_bad_params_are_32602_naming_the_parameter() -> None:
    wire = Wire()
    cases = [
        ("receive", {"limit": 0}, "limit"),
        ("receive", {"limit": 1001}, "limit"),
        ("receive", {"limit": "5"}, "limit"),
        ("receive", {"waitMs": 30001}, "waitMs"),
        ("receive", {"consumer": "bad consumer"}, "consumer"),
        ("receive", {"colour": "red"}, "colour"),
        ("send", {"to": "x", "key": "k"}, "text"),
        ("send", {"to": "x", "text": "a", "data": 1, "key": "k"}, "text"),
        ("send", {"to": "x", "text": "a"}, "key"),
        ("send", {"to": "x", "text": "a", "key": "k" * 257}, "key"),
        ("reply", {"conversationId": "XYZ", "text": "a", "key": "k"}, "conversationId"),
        ("ack", {"messageIds": []}, "messageIds"),
        ("ack", {"messageIds": "ab"}, "messageIds"),
        ("connect", {"to": "x", "name": "1bad"}, "name"),
        ("identity", {"x": 1}, "x"),
    ]
    for i, (method, params, _) in enumerate(cases):
        wire.request(i, method, params)
    answers = sorted(await wire.answers(len(cases)), key=lambda a: a["id"])
    for (method, params, field), answer in zip(cases, answers, strict=True):
        error = answer["error"]
        assert error["code"] == -32602, (method, params)
        assert error["data"] == {"reason": "invalid_argument", "field": field}, (method, params)
        assert field in error["message"]
    assert wire.core.calls == []


async def test_positional_params_are_refused_but_an_empty_array_is_no_params() -> None:
    wire = Wire()
    wire.request(1, "receive", [10])
    wire.request(2, "identity", [])
    answers = sorted(await wire.answers(2), key=lambda a: a["id"])
    assert answers[0]["error"]["code"] == -32602
    assert "result" in answers[1]


async def test_core_errors_use_the_error_table() -> None:
    wire = Wire()
    errors = {
        "Accept": NotFound("no such conversation", reason="unknown_conversation"),
        "Sync": Unavailable("network down", reason="sync_failed"),
        "Send": RateLimited("slow down", retry_after_ms=1500),
    }
    for rpc, error in errors.items():

        async def fail(request: Any, error: Exception = error) -> Any:
            raise error

        wire.core.behaviours[rpc] = fail
    wire.request(1, "accept", {"conversationId": "ab"})
    wire.request(2, "sync")
    wire.request(3, "send", {"to": "ab", "text": "hi", "key": "k"})
    answers = sorted(await wire.answers(3), key=lambda a: a["id"])
    assert answers[0]["error"] == {
        "code": -32002,
        "message": "no such conversation",
        "data": {"reason": "unknown_conversation"},
    }
    assert answers[1]["error"]["code"] == -32001
    assert answers[1]["error"]["data"] == {"reason": "sync_failed"}
    assert answers[2]["error"]["data"] == {"reason": "rate_limited", "retryAfterMs": 1500}


async def test_an_unexpected_failure_is_an_internal_error_and_serving_goes_on() -> None:
    wire = Wire()

    async def broken(request: Any) -> Any:
        raise RuntimeError("boom")

    wire.core.behaviours["Requests"] = broken
    wire.request(1, "requests")
    answer = await wire.answer()
    assert answer["error"]["code"] == -32603 and "boom" in answer["error"]["message"]
    wire.request(2, "identity")
    assert (await wire.answer())["id"] == 2


async def test_a_batch_is_answered_in_one_array_in_order() -> None:
    wire = Wire()
    wire.send(
        [
            {"jsonrpc": "2.0", "id": "a", "method": "identity"},
            {"jsonrpc": "2.0", "method": "sync"},
            {"jsonrpc": "2.0", "id": "b", "method": "nope"},
            7,
            {"jsonrpc": "2.0", "id": "c", "method": "receive", "params": {"limit": 0}},
        ]
    )
    answer = await wire.answer()
    assert isinstance(answer, list)
    assert [a["id"] for a in answer] == ["a", "b", None, "c"]
    assert [a.get("error", {}).get("code") for a in answer] == [None, -32601, -32600, -32602]


async def test_an_empty_batch_is_one_invalid_request() -> None:
    wire = Wire()
    wire.send([])
    answer = await wire.answer()
    assert answer["error"]["code"] == -32600 and answer["id"] is None


async def test_a_batch_of_notifications_gets_no_answer() -> None:
    wire = Wire()
    wire.send([{"jsonrpc": "2.0", "method": "sync"}, {"jsonrpc": "2.0", "method": "identity"}])
    wire.request(1, "identity")
    assert (await wire.answer())["id"] == 1
    assert await wire.close() == []


async def test_a_cancelled_batch_member_is_left_out_of_the_array() -> None:
    wire = Wire()
    started = asyncio.Event()

    async def endless(request: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    wire.core.behaviours["Receive"] = endless
    wire.send(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "identity"},
            {"jsonrpc": "2.0", "id": 2, "method": "receive", "params": {"waitMs": 30000}},
        ]
    )
    await started.wait()
    wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    answer = await wire.answer()
    assert [a["id"] for a in answer] == [1]


async def test_end_of_input_cancels_receives_and_answers_everything_else() -> None:
    wire = Wire()
    release = asyncio.Event()
    started = asyncio.Event()

    async def endless(request: Any) -> Any:
        await asyncio.Event().wait()

    async def slow_send(request: Any) -> Any:
        started.set()
        await release.wait()
        return pb.SendResponse(message_id="ab", conversation_id="cd")

    wire.core.behaviours["Receive"] = endless
    wire.core.behaviours["Send"] = slow_send
    wire.request(1, "receive", {"waitMs": 30000})
    wire.request(2, "send", {"to": "cd", "text": "hi", "key": "k1"})
    await started.wait()
    wire.send_raw(b"")
    await wire.core.wait_cancelled("Receive")
    assert not wire.task.done()
    release.set()
    rest = await wire.close()
    assert rest == [
        {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {
                "messageId": "ab",
                "conversationId": "cd",
                "deduplicated": False,
                "published": False,
            },
        }
    ]


async def test_a_thousand_outstanding_requests_are_all_answered() -> None:
    wire = Wire()
    gate = asyncio.Event()
    waiting = 0

    async def held(request: Any) -> Any:
        nonlocal waiting
        waiting += 1
        if waiting == 1000:
            gate.set()
        await gate.wait()
        return pb.ReceiveResponse()

    wire.core.behaviours["Receive"] = held
    for i in range(1000):
        wire.request(i, "receive", {"waitMs": 30000})
    answers = await wire.answers(1000, timeout=30)
    assert sorted(a["id"] for a in answers) == list(range(1000))
    assert all(a["result"] == {"messages": [], "more": False} for a in answers)


async def test_a_line_over_the_limit_is_refused_and_the_next_one_served() -> None:
    wire = Wire()
    wire.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"identity","params":{"x":"')
    chunk = b"x" * (1024 * 1024)
    for _ in range(MAX_LINE_BYTES // len(chunk) + 1):
        wire.send_raw(chunk)
    wire.send_raw(b'"}}\n{"jsonrpc":"2.0","id":2,"method":"identity"}\n')
    first, second = await wire.answers(2)
    assert first["id"] is None and first["error"]["code"] == -32600
    assert first["error"]["data"]["reason"] == "line_too_long"
    assert second["id"] == 2 and "result" in second


async def test_answers_are_one_ascii_line_each_even_for_odd_ids() -> None:
    wire = Wire()
    wire.send_raw('{"jsonrpc":"2.0","id":"\\ud800 é\\n","method":"identity"}\n'.encode())
    await wire.answers(1)
    (line,) = wire.lines()
    assert line.isascii() and b"\n" not in line


async def test_when_the_reader_goes_away_outstanding_calls_are_cancelled() -> None:
    wire = Wire()
    started = asyncio.Event()

    async def endless(request: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    wire.core.behaviours["Send"] = endless
    wire.request(1, "send", {"to": "ab", "text": "x", "key": "k"})
    await started.wait()
    wire.writer.gone.set()
    async with asyncio.timeout(10):
        await wire.task
    assert wire.core.cancelled == ["Send"]


async def test_a_batch_over_the_limit_is_one_invalid_request_and_runs_nothing() -> None:
    wire = Wire()
    call = {"jsonrpc": "2.0", "id": 1, "method": "identity"}
    wire.send([call] * (MAX_BATCH + 1))
    answer = await wire.answer()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert f"at most {MAX_BATCH}" in answer["error"]["message"]
    assert wire.core.calls == []
    wire.send([{**call, "id": i} for i in range(MAX_BATCH)])
    full = await wire.answer()
    assert [a["id"] for a in full] == list(range(MAX_BATCH))


async def test_each_batch_element_takes_a_slot_of_the_outstanding_bound() -> None:
    running, most, release = 0, 0, asyncio.Event()
    lines: list[bytes] = []

    async def handler(method: str, params: Any) -> Any:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1
        return {}

    async def write(line: bytes) -> None:
        lines.append(line)

    dispatcher = Dispatcher(handler, write, max_outstanding=3)
    batch = [{"jsonrpc": "2.0", "id": i, "method": "identity"} for i in range(5)]
    feeding = asyncio.ensure_future(dispatcher.feed(json.dumps(batch).encode()))
    await until(lambda: now(running == 3))
    assert not feeding.done()  # reading stops until elements finish, as for single lines
    release.set()
    await feeding
    await dispatcher.close()
    assert most == 3
    assert [a["id"] for a in json.loads(lines[0])] == [0, 1, 2, 3, 4]
