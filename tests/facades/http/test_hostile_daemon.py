"""Hostile calls against a real daemon on a devnet: numbers out of range are invalid
params, and no answer (a batch included) grows past one bound, over HTTP and on
cone.sock alike, while cone.sock keeps answering."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from cone.facades.jsonrpc import ANSWER_MAX_BYTES
from support.http_daemon import HttpDaemon
from support.peers import Peer
from support.waiting import until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def _on_socket(daemon: HttpDaemon, body: Any) -> tuple[int, Any]:
    """One JSON-RPC line on cone.sock: (its size in bytes, its answer)."""
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket), limit=2**26)
    try:
        writer.write(json.dumps(body).encode() + b"\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 60)
        return len(line), json.loads(line)
    finally:
        writer.close()


async def test_a_sequence_past_what_the_store_holds_is_invalid_params(
    daemon: HttpDaemon, session: aiohttp.ClientSession
) -> None:
    for after in (2**63, 2**64 - 1, 2**64, 10**200):
        body = {"jsonrpc": "2.0", "id": 1, "method": "peek", "params": {"afterSequence": after}}
        status, answer = await daemon.rpc(body, session)
        assert status == 200
        assert answer["error"]["code"] == -32602, answer
        assert "afterSequence" in answer["error"]["message"]
        assert (await _on_socket(daemon, body))[1] == answer
    body = {"jsonrpc": "2.0", "id": 1, "method": "peek", "params": {"afterSequence": 2**63 - 1}}
    assert (await daemon.rpc(body, session))[1]["result"]["messages"] == []


async def _big_messages(daemon: HttpDaemon, session: aiohttp.ClientSession, peer: Peer) -> None:
    """Two accepted messages of 600 KB each from `peer`."""
    dm = await daemon.dm_from(peer)
    for n in range(2):
        await peer.send(dm, f"{n}" + "x" * 600_000)

    async def held() -> list[Any]:
        _, answer = await daemon.rpc({"jsonrpc": "2.0", "id": 1, "method": "requests"}, session)
        return [r for r in answer["result"]["requests"] if r.get("pendingMessages", 0) >= 2]

    (request,) = await until(held, timeout=60)
    accept = {"method": "accept", "params": {"conversationId": request["conversationId"]}}
    _, answer = await daemon.rpc({"jsonrpc": "2.0", "id": 2, **accept}, session)
    assert answer["result"]["accepted"] is True


async def test_a_batch_answer_is_bounded_as_a_whole(
    daemon: HttpDaemon, session: aiohttp.ClientSession, alice: Peer
) -> None:
    """100 `peek {"limit": 1000}` in one batch would make 60 MB: the answer stays within
    ANSWER_MAX_BYTES, the calls that do not fit say so, and cone.sock answers meanwhile."""
    await _big_messages(daemon, session, alice)
    peek = {"jsonrpc": "2.0", "method": "peek", "params": {"limit": 1000}}
    batch = [{**peek, "id": n} for n in range(100)]
    async with session.post(daemon.url + "api/v1/rpc", json=batch, headers=daemon.auth) as r:
        raw = await r.read()
    assert r.status == 200
    over_socket = asyncio.create_task(_on_socket(daemon, batch))
    # cone.sock answers a plain call while the big batch runs on it.
    assert (await daemon.client.identity()).inbox_id
    for size, answers in ((len(raw), json.loads(raw)), await over_socket):
        assert size <= ANSWER_MAX_BYTES
        assert sorted(a["id"] for a in answers) == list(range(100))
        fitted = [a for a in answers if "result" in a]
        refused = [a for a in answers if "error" in a]
        assert fitted and refused
        assert all(a["result"]["messages"] for a in fitted)
        for a in refused:
            assert a["error"]["data"]["reason"] == "answer_too_large", a
            assert "smaller batch" in a["error"]["message"]
