"""`cone daemon --http` as a real subprocess, and a small SSE reader (HTTP tests, bench)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from support.daemons import DaemonProcess
from support.ports import fresh_port


class HttpDaemon(DaemonProcess):
    """`cone daemon --http 127.0.0.1:PORT` (the same port across restarts)."""

    def __init__(self, home: Path, api_url: str, port: int | None = None) -> None:
        super().__init__(home, api_url)
        self.port = port or fresh_port()

    def args(self) -> list[str]:
        return [*super().args(), "--http", f"127.0.0.1:{self.port}"]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def token(self) -> str:
        return (self.home / "http.token").read_text().strip()

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def rpc(self, body: Any, session: aiohttp.ClientSession) -> tuple[int, Any]:
        """POST a JSON-RPC request or batch; (status, decoded body or None)."""
        async with session.post(self.url + "api/v1/rpc", json=body, headers=self.auth) as r:
            raw = await r.read()
            return r.status, json.loads(raw) if raw else None

    async def result(self, method: str, **params: Any) -> Any:
        """Call one JSON-RPC method over HTTP on a session of its own; its result (an
        error answer fails the test)."""
        async with aiohttp.ClientSession() as session:
            _, answer = await self.rpc(
                {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, session
            )
        assert "error" not in answer, answer
        return answer["result"]


@dataclass
class Event:
    """One Server-Sent Event."""

    id: str | None = None
    event: str = "message"
    data: str = ""
    comment: bool = False
    lines: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def is_message(self) -> bool:
        """Whether a browser would dispatch this as a `message` event: SSE dispatches
        only a block with data, so a heartbeat comment or a `retry` line is none."""
        return self.event == "message" and bool(self.data)


@asynccontextmanager
async def event_stream(
    daemon: HttpDaemon,
    session: aiohttp.ClientSession,
    query: str,
    last_event_id: str | None = None,
) -> AsyncIterator[asyncio.Queue[Event]]:
    """Events (and heartbeat comments) of one GET /api/v1/events, on a queue."""
    headers = dict(daemon.auth)
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    queue: asyncio.Queue[Event] = asyncio.Queue()
    response = await session.get(daemon.url + "api/v1/events?" + query, headers=headers)
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"].startswith("text/event-stream")

    async def pump() -> None:
        event = Event()
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if not line:
                if event.lines:
                    await queue.put(event)
                event = Event()
                continue
            event.lines.append(line)
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "":
                event.comment = True
            elif name == "id":
                event.id = value
            elif name == "event":
                event.event = value
            elif name == "data":
                event.data += value

    task = asyncio.create_task(pump())
    try:
        yield queue
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        response.close()


async def next_message(queue: asyncio.Queue[Event], timeout: float = 60.0) -> Event:
    """The next `message` event, skipping heartbeats and `retry`."""
    async with asyncio.timeout(timeout):
        while True:
            event = await queue.get()
            if event.is_message:
                return event
