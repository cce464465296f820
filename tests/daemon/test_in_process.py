"""Calls into the core in the daemon's own process (JSON-RPC on `cone.sock`) run the
handler gRPC serves, checks and metrics included, and fail as a gRPC client would."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from cone import metrics
from cone.daemon.edge import edge
from cone.daemon.in_process import InProcess
from cone.errors import ConeError, Internal, InvalidArgument, NotFound, Unavailable
from cone.grpc_errors import from_code, to_status
from conepb.v1 import cone_pb2 as pb

SEND = "/cone.v1.ConeService/Send"


def _caller(fn: Any, *, calls: int = 4) -> InProcess:
    handler = grpc.unary_unary_rpc_method_handler(
        fn,
        request_deserializer=pb.SendRequest.FromString,
        response_serializer=pb.SendResponse.SerializeToString,
    )
    return InProcess({"Send": edge(SEND, handler)}, long_polls=2, calls=calls)


def _request() -> pb.SendRequest:
    return pb.SendRequest(to="0x" + "ab" * 20, text="hi", key="k1")


class _Waits:
    """A handler that waits until cancelled, saying when it started and ended."""

    def __init__(self) -> None:
        self.started, self.cancelled = asyncio.Event(), asyncio.Event()

    async def __call__(self, request: pb.SendRequest, context: Any) -> pb.SendResponse:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")


async def test_an_answer_comes_back_as_the_servicer_made_it() -> None:
    async def send(request: pb.SendRequest, context: Any) -> pb.SendResponse:
        return pb.SendResponse(message_id="m" + request.key, published=True)

    response = await _caller(send).call("Send", _request())
    assert response == pb.SendResponse(message_id="mk1", published=True)


async def test_an_abort_raises_the_error_a_grpc_client_would_with_its_details() -> None:
    err = NotFound("no such conversation", reason="unknown_conversation", field="to")

    async def send(request: pb.SendRequest, context: Any) -> pb.SendResponse:
        await context.abort_with_status(to_status(err))
        raise AssertionError("abort returned")

    with pytest.raises(NotFound) as raised:
        await _caller(send).call("Send", _request())
    got = raised.value
    assert (got.message, got.reason, got.field) == (err.message, err.reason, err.field)


async def test_the_protos_rules_run_before_the_servicer() -> None:
    reached: list[pb.SendRequest] = []

    async def send(request: pb.SendRequest, context: Any) -> pb.SendResponse:
        reached.append(request)
        return pb.SendResponse()

    bad = pb.SendRequest(to="0x" + "ab" * 20, text="hi", key="")
    with pytest.raises(InvalidArgument) as raised:
        await _caller(send).call("Send", bad)
    assert raised.value.field == "key"
    assert reached == []


async def test_a_call_past_its_timeout_fails_as_a_deadline_and_is_cancelled() -> None:
    send = _Waits()
    with pytest.raises(ConeError) as raised:
        await _caller(send).call("Send", _request(), timeout=0.01)
    expected = from_code(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    assert type(raised.value) is type(expected)
    assert raised.value.reason == expected.reason
    assert send.cancelled.is_set()


async def test_a_timeout_inside_the_handler_is_not_taken_for_the_deadline() -> None:
    async def send(request: pb.SendRequest, context: Any) -> pb.SendResponse:
        raise TimeoutError("the handler's own")

    with pytest.raises(TimeoutError, match="the handler's own"):
        await _caller(send).call("Send", _request(), timeout=60)


async def test_each_call_is_counted_once_with_its_status() -> None:
    async def send(request: pb.SendRequest, context: Any) -> pb.SendResponse:
        if request.key == "bad":
            await context.abort_with_status(to_status(NotFound("gone", reason="not_found")))
        return pb.SendResponse()

    def count(code: str) -> float:
        return metrics.RPCS.labels("Send", code)._value.get()

    ok, not_found = count("OK"), count("NOT_FOUND")
    caller = _caller(send)
    await caller.call("Send", _request())
    with pytest.raises(NotFound):
        await caller.call("Send", pb.SendRequest(to="0x" + "ab" * 20, text="hi", key="bad"))
    assert (count("OK") - ok, count("NOT_FOUND") - not_found) == (1, 1)


async def test_calls_beyond_the_bound_wait_for_room() -> None:
    release = asyncio.Event()
    started: list[asyncio.Event] = [asyncio.Event() for _ in range(5)]

    async def send(request: pb.SendRequest, context: Any) -> pb.SendResponse:
        started[int(request.text)].set()
        await release.wait()
        return pb.SendResponse()

    caller = _caller(send, calls=2)
    calls = [
        asyncio.create_task(
            caller.call("Send", pb.SendRequest(to="0x" + "ab" * 20, text=str(i), key=f"k{i}"))
        )
        for i in range(5)
    ]
    await started[0].wait()
    await started[1].wait()
    for _ in range(20):  # every other call has had its turns on the loop
        await asyncio.sleep(0)
    assert [e.is_set() for e in started] == [True, True, False, False, False]
    release.set()
    await asyncio.gather(*calls)
    assert all(e.is_set() for e in started)


async def test_a_method_that_is_not_served_is_an_internal_error() -> None:
    async def send(request: pb.SendRequest, context: Any) -> pb.SendResponse:
        return pb.SendResponse()

    with pytest.raises(Internal, match="Sned"):
        await _caller(send).call("Sned", _request())


async def test_a_caller_that_goes_away_cancels_its_call() -> None:
    send = _Waits()
    call = asyncio.create_task(_caller(send).call("Send", _request()))
    await send.started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.wait_for(send.cancelled.wait(), 5)


async def test_closing_ends_the_calls_running_and_refuses_new_ones() -> None:
    send = _Waits()
    caller = _caller(send)
    running = asyncio.create_task(caller.call("Send", _request()))
    await send.started.wait()
    await caller.close()
    with pytest.raises(Unavailable) as raised:
        await running
    assert raised.value.reason == "daemon_unavailable"
    with pytest.raises(Unavailable):
        await caller.call("Send", _request())
