"""Hostile input to the HTTP front, on a real server in this process (no core behind
it): every number and header from a client is checked where it enters and refused
with a 4xx, never a 500; API answers are never cached or sniffed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from cone.facades.http.options import HttpOptions
from cone.facades.http.server import Serving, serving


@pytest.fixture
async def front(tmp_path: Path) -> AsyncIterator[Serving]:
    async with serving(HttpOptions(), tmp_path, tmp_path / "absent.sock") as s:
        yield s


def _token(s: Serving) -> str:
    return s.token_file.read_text().strip()


async def _raw(s: Serving, request: bytes) -> bytes:
    """One raw HTTP/1.1 request (headers as bytes, so anything can be sent); the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(10):
            return await reader.read()
    finally:
        writer.close()


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


BAD_CURSORS = ["²", "1" * 5000, str(2**64 - 1), str(2**63), "-1", "1e3", "0x10", "٣"]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
async def test_a_bad_last_event_id_is_400(front: Serving, cursor: str) -> None:
    head = f"GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:{front.port}\r\n"
    head += f"Authorization: Bearer {_token(front)}\r\nConnection: close\r\n"
    answer = await _raw(front, (head + f"Last-Event-ID: {cursor}\r\n\r\n").encode())
    assert _status(answer) == 400, answer[:200]
    assert b"Last-Event-ID" in answer
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            front.url + "api/v1/events",
            params={"lastEventId": cursor},
            headers={"Authorization": f"Bearer {_token(front)}"},
        ) as r,
    ):
        assert r.status == 400
        assert "lastEventId" in (await r.json())["error"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0.1", "31", "x", "1" * 400])
async def test_a_bad_heartbeat_is_400(front: Serving, value: str) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            front.url + "api/v1/events",
            params={"heartbeat": value},
            headers={"Authorization": f"Bearer {_token(front)}"},
        ) as r,
    ):
        assert r.status == 400, value
        assert "heartbeat" in (await r.json())["error"]


@pytest.mark.parametrize(
    "value",
    [b"Bearer \xff\xfe", b"\xff\xfe", b"Bearer \x80" + b"a" * 42, b"Bearer  ", b"Bearer"],
)
async def test_a_malformed_authorization_header_is_401_without_a_traceback(
    front: Serving, value: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    request = (
        f"POST /api/v1/rpc HTTP/1.1\r\nHost: 127.0.0.1:{front.port}\r\n".encode()
        + b"Authorization: "
        + value
        + b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        + b"Connection: close\r\n\r\n{}"
    )
    answer = await _raw(front, request)
    assert _status(answer) == 401, answer[:300]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


@pytest.mark.parametrize(
    ("path", "header"),
    [
        (b"POST /api/v1/rpc", b"Host: \xff\xfe"),
        (b"GET /metrics", b"Host: \xff\xfe"),
        (b"POST /api/v1/rpc", b"Origin: \xff\xfe"),
        (b"POST /api/v1/rpc", b"Content-Type: \xff\xfe"),
        (b"GET /api/v1/events", b"Last-Event-ID: \xff\xfe"),
        (b"GET /api/v1/events", b"Last-Event-ID: 1\x00"),
    ],
)
async def test_every_malformed_header_is_a_4xx(
    front: Serving, path: bytes, header: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    request = path + b" HTTP/1.1\r\n"
    if not header.startswith(b"Host"):
        request += f"Host: 127.0.0.1:{front.port}\r\n".encode()
    request += header + b"\r\n"
    request += f"Authorization: Bearer {_token(front)}\r\n".encode()
    if not header.startswith(b"Content-Type"):
        request += b"Content-Type: application/json\r\n"
    request += b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"
    answer = await _raw(front, request)
    assert 400 <= _status(answer) < 500, answer[:200]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


async def test_api_answers_are_not_cached_or_sniffed(front: Serving) -> None:
    auth = {"Authorization": f"Bearer {_token(front)}"}
    async with aiohttp.ClientSession() as session:
        answers = [
            await session.post(
                front.url + "api/v1/rpc",
                json={"jsonrpc": "2.0", "id": 1, "method": "identity"},
                headers=auth,
            ),
            await session.post(front.url + "api/v1/rpc", json={}, headers={}),  # 401
            await session.get(front.url + "metrics", headers=auth),
            await session.get(front.url + "metrics"),  # 401
            await session.get(front.url + "api/v1/health"),
            await session.get(front.url + "api/v1/health", headers={"Host": "evil.example"}),
            await session.get(front.url + "api/v1/events?heartbeat=nan", headers=auth),
        ]
        for r in answers:
            await r.read()
            assert r.headers.get("Cache-Control") == "no-store", (r.url, r.status)
            assert r.headers.get("X-Content-Type-Options") == "nosniff", (r.url, r.status)
            r.close()
