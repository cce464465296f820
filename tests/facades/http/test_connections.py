"""Connections of the HTTP front under attack, on a real server in this process (no
core behind it): counted from accept (a TLS handshake included), silent handshakes
closed at their deadline, slow clients evicted for a client that sends its request,
and connections past the bound closed at once when every slot runs a request.
Each attack is bounded to a few seconds."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from cone.facades.http import _guard
from cone.facades.http.options import HttpOptions
from cone.facades.http.server import Serving, serving
from support.waiting import until

from .test_guard import NO_CORE, _tls_files

LIMIT = 8
Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@pytest.fixture(autouse=True)
def _small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_guard, "MAX_CONNECTIONS", LIMIT)
    monkeypatch.setattr(_guard, "HANDSHAKE_TIMEOUT_S", 1.0)
    monkeypatch.setattr(_guard, "HEADER_TIMEOUT_S", 2.0)


@pytest.fixture
async def tls_front(tmp_path: Path) -> AsyncIterator[tuple[Serving, ssl.SSLContext]]:
    cert, key = _tls_files(tmp_path)
    options = HttpOptions(host="127.0.0.1", cert=cert, key=key)
    async with serving(options, tmp_path, NO_CORE) as s:
        yield s, ssl.create_default_context(cafile=str(cert))


def _token(s: Serving) -> str:
    return s.token_file.read_text().strip()


async def _served(s: Serving, trust: ssl.SSLContext | None = None) -> int:
    """An authenticated JSON-RPC call on a new connection; its HTTP status."""
    host = "localhost" if trust is not None else "127.0.0.1"
    scheme = "https" if trust is not None else "http"
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session,
        session.post(
            f"{scheme}://{host}:{s.port}/api/v1/rpc",
            json={"jsonrpc": "2.0", "id": 1, "method": "identity"},
            headers={"Authorization": f"Bearer {_token(s)}", "Host": f"localhost:{s.port}"},
            ssl=trust if trust is not None else False,
        ) as r,
    ):
        await r.read()
        return r.status


async def _closed(stream: Stream, within: float = 5.0) -> bool:
    """Whether the server closes the connection within `within` seconds."""
    try:
        async with asyncio.timeout(within):
            while await stream[0].read(4096):
                pass
        return True
    except (TimeoutError, ConnectionError):
        return False


def _close_all(streams: list[Stream]) -> None:
    for _, writer in streams:
        writer.close()


async def test_silent_tls_connections_count_and_are_closed_at_the_handshake_deadline(
    tls_front: tuple[Serving, ssl.SSLContext],
) -> None:
    front, trust = tls_front
    silent = [await asyncio.open_connection("127.0.0.1", front.port) for _ in range(LIMIT)]
    try:
        # Every slot holds a connection that never starts its handshake: they count,
        # so the next one takes the place of the oldest.
        newest = await asyncio.open_connection("127.0.0.1", front.port)
        silent.append(newest)
        assert await _closed(silent[0], within=1.0)
        # An authenticated client is served while they hold the rest.
        assert await _served(front, trust) == 200
        # The handshake deadline closes the silent ones.
        for stream in silent[1:]:
            assert await _closed(stream, within=5.0)
    finally:
        _close_all(silent)


async def slowloris(port: int, stop: asyncio.Event, opened: list[int]) -> None:
    """One slow client, re-opened whenever the server closes it: a header line, then
    another every so often, never the end of the headers."""
    while not stop.is_set():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        opened.append(1)
        try:
            writer.write(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
            while not stop.is_set() and not reader.at_eof():
                writer.write(b"X-a: b\r\n")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await reader.read(1)
        except ConnectionError:
            pass
        finally:
            writer.close()


async def test_slowloris_does_not_starve_an_authenticated_client(tmp_path: Path) -> None:
    async with serving(HttpOptions(), tmp_path, NO_CORE) as front:
        stop, opened = asyncio.Event(), []
        attackers = [asyncio.create_task(slowloris(front.port, stop, opened)) for _ in range(LIMIT)]
        try:

            async def all_open() -> bool:
                return len(opened) >= LIMIT

            await until(all_open, timeout=5)
            statuses = [await _served(front) for _ in range(10)]
            assert statuses == [200] * 10
        finally:
            stop.set()
            await asyncio.gather(*attackers, return_exceptions=True)


async def test_past_the_bound_a_connection_is_closed_at_once_when_every_slot_runs(
    tmp_path: Path,
) -> None:
    """Every slot runs a request (an authenticated POST whose body is slow): a new
    connection is closed at once, not queued."""
    async with serving(HttpOptions(), tmp_path, NO_CORE) as front:
        running: list[Stream] = []
        try:
            for _ in range(LIMIT):
                stream = await asyncio.open_connection("127.0.0.1", front.port)
                stream[1].write(
                    f"POST /api/v1/rpc HTTP/1.1\r\nHost: 127.0.0.1:{front.port}\r\n"
                    f"Authorization: Bearer {_token(front)}\r\n"
                    "Content-Type: application/json\r\nContent-Length: 100\r\n"
                    "Expect: 100-continue\r\n\r\n".encode()
                )
                await stream[1].drain()
                running.append(stream)
                # The server says "go on" from inside the request, which runs by then.
                async with asyncio.timeout(5):
                    assert (await stream[0].readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 100")
            over = await asyncio.open_connection("127.0.0.1", front.port)
            running.append(over)
            assert await _closed(over, within=1.0)
            assert not await _closed(running[0], within=0.2)
        finally:
            _close_all(running)
