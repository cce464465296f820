"""One bound for a whole answer: a single answer or a batch's array never passes
ANSWER_MAX_BYTES; what does not fit is an `answer_too_large` error, and small answers
(every write's) always fit. Pure dispatch logic over a handler of sized results."""

from __future__ import annotations

import json
from typing import Any

from cone.facades.jsonrpc import ANSWER_MAX_BYTES, Dispatcher
from cone.facades.jsonrpc._dispatch import MAX_BATCH


async def _sized(method: str, params: Any) -> Any:
    """`big` answers about `params["bytes"]` bytes; `small` answers a few."""
    if method == "big":
        return {"blob": "x" * int(params["bytes"])}
    return {"ok": True}


async def _run(message: Any) -> list[bytes]:
    out: list[bytes] = []

    async def write(line: bytes) -> None:
        out.append(line)

    dispatcher = Dispatcher(_sized, write)
    await dispatcher.feed(json.dumps(message).encode())
    await dispatcher.close()
    return out


def _call(id_: int, method: str, size: int = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": {"bytes": size}}


async def test_a_batch_answer_stays_within_the_bound_and_says_what_was_dropped() -> None:
    size = 1024 * 1024
    batch = [_call(n, "big", size) if n % 2 else _call(n, "small") for n in range(MAX_BATCH)]
    (line,) = await _run(batch)
    assert len(line) <= ANSWER_MAX_BYTES
    answers = json.loads(line)
    assert sorted(a["id"] for a in answers) == list(range(MAX_BATCH))
    small = [a for a in answers if a["id"] % 2 == 0]
    assert all(a["result"] == {"ok": True} for a in small)  # writes never lose their answer
    big = [a for a in answers if a["id"] % 2]
    fitted = [a for a in big if "result" in a]
    refused = [a for a in big if "error" in a]
    assert 10 <= len(fitted) < 16 and refused
    for a in refused:
        assert a["error"]["code"] == -32600
        assert a["error"]["data"]["reason"] == "answer_too_large"
        assert "smaller batch" in a["error"]["message"]


async def test_a_single_answer_over_the_bound_is_an_error() -> None:
    (line,) = await _run(_call(1, "big", ANSWER_MAX_BYTES))
    answer = json.loads(line)
    assert answer["error"]["data"]["reason"] == "answer_too_large"
    (line,) = await _run(_call(2, "big", ANSWER_MAX_BYTES - 1000))
    assert len(line) <= ANSWER_MAX_BYTES and "result" in json.loads(line)


async def test_a_batch_that_fits_is_answered_whole_in_order() -> None:
    batch = [_call(n, "big", 1000) for n in range(5)]
    (line,) = await _run(batch)
    assert [a["id"] for a in json.loads(line)] == list(range(5))
    assert all("result" in a for a in json.loads(line))
