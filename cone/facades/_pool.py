"""A small pool of gRPC channels to one `cone.sock`, bounding calls in flight.

Measured with grpcio 1.85: a grpc.aio client process with more than about a thousand
unary calls in flight at once gets a few percent of them back CANCELLED, however many
channels (connections) carry them; two processes with a thousand each get none. So a
pool keeps at most `long_polls + calls` (1,024) in flight and queues the rest, and
splits that room in two: long polls (`receive`) take their own share, so that a
thousand waiting receives never delay an `identity`. Each channel carries at most
`per_channel` calls; another channel (its own connection) opens when all are busy.
Channels open lazily: a pool that is never used costs nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from cone.client import ConeClient
from cone.errors import ConeError
from cone.limits import CALLS_IN_FLIGHT, LONG_POLLS_IN_FLIGHT

log = logging.getLogger(__name__)

LONG_POLLS: Final = LONG_POLLS_IN_FLIGHT
CALLS: Final = CALLS_IN_FLIGHT
PER_CHANNEL: Final = 512


class ChannelPool:
    """`await pool.call("Send", request, timeout=...)`; close with `aclose()`."""

    def __init__(
        self,
        socket: Path | str,
        *,
        long_polls: int = LONG_POLLS,
        calls: int = CALLS,
        per_channel: int = PER_CHANNEL,
    ) -> None:
        self.socket = Path(socket)
        self.per_channel = per_channel
        self._long = asyncio.Semaphore(long_polls)
        self._short = asyncio.Semaphore(calls)
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

    async def call(
        self, rpc: str, request: Any, timeout: float | None = None, *, long_poll: bool = False
    ) -> Any:
        """Call `rpc` (PascalCase); raises the daemon's ConeError."""
        async with self._long if long_poll else self._short:
            i = self._pick()
            self._load[i] += 1
            started = time.monotonic()
            try:
                response = await self._clients[i].call(rpc, request, timeout=timeout)
            except ConeError as err:
                log.debug("call %s failed: %s", rpc, err.reason)
                raise
            finally:
                self._load[i] -= 1
            log.debug("call %s answered in %.1f ms", rpc, (time.monotonic() - started) * 1000)
            return response

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
