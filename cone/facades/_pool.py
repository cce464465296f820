"""A small pool of gRPC channels to one `cone.sock`, bounding calls in flight.

One grpc.aio channel carries about a thousand concurrent calls well and starts
cancelling calls at a few thousand (docs/research figures), and a facade may have
thousands of long polls outstanding. So each channel takes at most `per_channel`
calls; another channel (its own connection) opens when all are busy, up to
`max_channels`; beyond that, calls wait their turn. Channels open lazily: a pool that
is never used costs nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from cone.client import ConeClient

PER_CHANNEL: Final = 500
MAX_CHANNELS: Final = 8


class ChannelPool:
    """`await pool.call("Send", request, timeout=...)`; close with `aclose()`."""

    def __init__(
        self,
        socket: Path | str,
        *,
        per_channel: int = PER_CHANNEL,
        max_channels: int = MAX_CHANNELS,
    ) -> None:
        self.socket = Path(socket)
        self.per_channel = per_channel
        self.max_channels = max_channels
        self._room = asyncio.Semaphore(per_channel * max_channels)
        self._clients: list[ConeClient] = []
        self._load: list[int] = []

    @property
    def channels(self) -> int:
        """Channels open now."""
        return len(self._clients)

    def _pick(self) -> int:
        best = min(range(len(self._load)), key=self._load.__getitem__, default=-1)
        if best < 0 or self._load[best] >= self.per_channel:
            # Each channel its own connection: grpc would otherwise share one subchannel.
            client = ConeClient(self.socket, options=[("grpc.use_local_subchannel_pool", 1)])
            self._clients.append(client)
            self._load.append(0)
            best = len(self._clients) - 1
        return best

    async def call(self, rpc: str, request: Any, timeout: float | None = None) -> Any:
        """Call `rpc` (PascalCase); raises the daemon's ConeError."""
        async with self._room:
            i = self._pick()
            self._load[i] += 1
            try:
                return await self._clients[i].call(rpc, request, timeout=timeout)
            finally:
                self._load[i] -= 1

    async def aclose(self) -> None:
        """Close every channel."""
        clients, self._clients, self._load = self._clients, [], []
        for client in clients:
            await client.close()

    async def __aenter__(self) -> ChannelPool:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
