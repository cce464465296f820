"""Reaching the core: relay to the process that holds the identity, or host it here.

`cone serve` and `cone mcp` share this. When another process (a daemon, a bridge,
another facade) holds the state lock, calls go to its `cone.sock`. Otherwise the core
starts in this process (`cone.daemon.runtime.running_core`), takes the lock and serves
`cone.sock` (gRPC, and JSON-RPC through this package) so that others can relay to it;
calls then go through that same socket. Leaving the block stops the core and releases
the lock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from cone.config import Settings
from cone.daemon.lock import StateLock
from cone.errors import StateError
from cone.facades._pool import ChannelPool

log = logging.getLogger(__name__)

# How long a relay waits for the holder's socket to come up (a daemon that has just
# taken the lock is still opening the identity).
SOCKET_WAIT_S = 30.0


@dataclass(frozen=True)
class Reached:
    """How this process reaches the core."""

    pool: ChannelPool
    embedded: bool


def held_by_other(settings: Settings) -> bool:
    """Whether another process holds the identity now."""
    return StateLock(settings.paths.lock).held_by_other()


async def _socket_up(settings: Settings, timeout: float = SOCKET_WAIT_S) -> None:
    """Wait until the holder's socket accepts connections (at once, normally)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_unix_connection(str(settings.paths.socket))
        except OSError:
            if time.monotonic() > deadline or not held_by_other(settings):
                return  # calls will say daemon_unavailable
            await asyncio.sleep(0.05)
        else:
            writer.close()
            return


@asynccontextmanager
async def reach_core(settings: Settings) -> AsyncIterator[Reached]:
    """Relay or embed, as the state lock says; see the module docstring."""
    async with ChannelPool(settings.paths.socket) as pool:
        if held_by_other(settings):
            log.info("relaying to %s", settings.paths.socket)
            await _socket_up(settings)
            yield Reached(pool, embedded=False)
            return
        from cone.daemon.runtime import running_core
        from cone.facades.jsonrpc import JsonRpcOnSocket

        stack = AsyncExitStack()
        try:
            await stack.enter_async_context(
                running_core(settings, json_handler=JsonRpcOnSocket(pool))
            )
        except StateError as err:
            if err.reason != "locked":
                raise
            log.info("another process took the identity first; relaying to it")
            await _socket_up(settings)
            yield Reached(pool, embedded=False)
            return
        async with stack:
            log.info("hosting the core on %s", settings.paths.socket)
            yield Reached(pool, embedded=True)


__all__ = ["Reached", "held_by_other", "reach_core"]
