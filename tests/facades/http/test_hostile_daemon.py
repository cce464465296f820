"""Hostile calls against a real daemon on a devnet: numbers out of range are invalid
params, and no answer (a batch included) grows past one bound, over HTTP and on
cone.sock alike, while cone.sock keeps answering."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cone.facades.jsonrpc import ANSWER_MAX_BYTES
from support.http_daemon import HttpDaemon
from support.peers import Peer
from support.waiting import until

from .test_connections import slowloris
from .test_guard import _tls_files

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
        async with asyncio.timeout(60):
            line = await reader.readline()
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


# Numbers out of their field's range or type, as raw JSON (1e400 is a float the
# parser reads as infinity).
BAD_NUMBERS = [
    ('"identity"', '{"protocol": 1099511627776}'),
    ('"receive"', '{"limit": 1180591620717411303424}'),
    ('"receive"', '{"limit": -1}'),
    ('"receive"', '{"limit": 1.5}'),
    ('"receive"', '{"waitMs": 1e400}'),
    ('"peek"', '{"afterSequence": -1}'),
    ('"peek"', '{"afterSequence": 1e400}'),
    ('"peek"', '{"afterSequence": "12"}'),
    ('"messages"', '{"conversationId": "ab", "limit": 1e20}'),
]


async def test_every_number_out_of_range_is_invalid_params(
    daemon: HttpDaemon, session: aiohttp.ClientSession
) -> None:
    for method, params in BAD_NUMBERS:
        raw = f'{{"jsonrpc": "2.0", "id": 1, "method": {method}, "params": {params}}}'
        async with session.post(
            daemon.url + "api/v1/rpc",
            data=raw,
            headers={**daemon.auth, "Content-Type": "application/json"},
        ) as r:
            assert r.status == 200
            answer = await r.json()
        assert answer["error"]["code"] in (-32602, -32700), (raw, answer)


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
    await _answers_on_cone_sock(daemon)
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


class _TlsDaemon(HttpDaemon):
    """`cone daemon --http 127.0.0.1:PORT --http-cert … --http-key …`."""

    def __init__(self, home: Path, api_url: str, cert: Path, key: Path) -> None:
        super().__init__(home, api_url)
        self.cert, self.key = cert, key

    def args(self) -> list[str]:
        return [*super().args(), "--http-cert", str(self.cert), "--http-key", str(self.key)]


async def _answers_on_cone_sock(daemon: HttpDaemon) -> None:
    """A new connection to cone.sock is answered (as `cone status` would need)."""
    _size, answer = await _on_socket(daemon, {"jsonrpc": "2.0", "id": 1, "method": "identity"})
    assert answer["result"]["inboxId"]


async def test_a_tls_flood_with_few_file_descriptors_leaves_cone_sock_answering(
    home: Path, devnet: str, tmp_path: Path
) -> None:
    """300 connections that never start their handshake, against a daemon allowed 100
    descriptors more than it uses at rest: cone.sock answers throughout, a client with
    the token is served over TLS, and the silent ones are closed at the handshake
    deadline."""
    cert, key = _tls_files(tmp_path)
    trust = ssl.create_default_context(cafile=str(cert))
    async with _TlsDaemon(home, devnet, cert, key) as daemon:
        assert daemon.proc is not None
        pid = daemon.proc.pid
        used = len(os.listdir(f"/proc/{pid}/fd"))
        _soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (used + 100, hard))
        flood: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        try:
            for n in range(300):
                flood.append(await asyncio.open_connection("127.0.0.1", daemon.port))
                if n % 50 == 49:
                    await _answers_on_cone_sock(daemon)
            url = f"https://localhost:{daemon.port}/api/v1/rpc"
            async with (
                aiohttp.ClientSession() as session,
                session.post(
                    url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "identity"},
                    headers=daemon.auth,
                    ssl=trust,
                ) as r,
            ):
                assert r.status == 200
                assert (await r.json())["result"]["inboxId"]
            await _answers_on_cone_sock(daemon)
            # The handshake deadline (5 s) has closed every silent connection.
            async with asyncio.timeout(15):
                for reader, _writer in flood:
                    with contextlib.suppress(ConnectionError):
                        while await reader.read(4096):
                            pass
            await _answers_on_cone_sock(daemon)
        finally:
            for _reader, writer in flood:
                writer.close()


async def test_slowloris_on_every_slot_leaves_clients_and_cone_sock_served(
    daemon: HttpDaemon, session: aiohttp.ClientSession
) -> None:
    """64 slow clients re-opened as they are closed (the whole bound): a client with
    the token is served, and cone.sock answers, while they go on."""
    stop, opened = asyncio.Event(), []
    attackers = [asyncio.create_task(slowloris(daemon.port, stop, opened)) for _ in range(64)]
    try:

        async def all_open() -> bool:
            return len(opened) >= 64

        await until(all_open, timeout=10)
        for n in range(5):
            fresh = aiohttp.TCPConnector(force_close=True)
            async with aiohttp.ClientSession(connector=fresh) as client:
                status, answer = await daemon.rpc(
                    {"jsonrpc": "2.0", "id": n, "method": "identity"}, client
                )
            assert status == 200 and answer["result"]["inboxId"]
            await _answers_on_cone_sock(daemon)
    finally:
        stop.set()
        await asyncio.gather(*attackers, return_exceptions=True)
