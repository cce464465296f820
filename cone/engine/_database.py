"""libxmtp's database connection: let go of it (so its files can be copied), reopen it.

Part of the engine: calls go through its `Calls`. A reopening that fails (a full
disk) is tried again in the background until it succeeds or the engine closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from cone.engine._calls import LOCAL_CALL_S, Calls
from cone.errors import ConeError

# The engine's logger: these lines read as they did before this module was split out.
log = logging.getLogger("cone.engine.engine")


class Database:
    """The connection of one identity's libxmtp client to its database.

    `client` gives libxmtp's current client at each call (it changes at the cutover),
    so a reopening retried in the background reaches the client in use."""

    def __init__(self, client: Callable[[], Any], calls: Calls) -> None:
        self._client = client
        self._x = calls
        self._reconnecting: asyncio.Task[None] | None = None

    async def release(self) -> None:
        """Let go of libxmtp's database (checkpointed) so its files can be copied."""
        await self._x.call_sync(
            self._client().release_db_connection, LOCAL_CALL_S, "releasing libxmtp's database"
        )

    async def reconnect(self) -> None:
        """Reopen libxmtp's database after `release`; when that fails (a full disk),
        keep trying in the background, so libxmtp works again once it can."""
        try:
            await self._reconnect_once()
        except ConeError:
            if self._reconnecting is None or self._reconnecting.done():
                self._reconnecting = asyncio.create_task(self._reconnect_until_done())
            raise

    async def stop(self) -> None:
        """Stop reopening in the background."""
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            await asyncio.gather(self._reconnecting, return_exceptions=True)

    async def _reconnect_until_done(self) -> None:
        delay = 0.5
        while True:
            await asyncio.sleep(delay)
            try:
                await self._reconnect_once()
            except ConeError as exc:
                log.warning("reopening libxmtp's database failed again: %s", exc)
                delay = min(delay * 2, 30.0)
            else:
                log.info("libxmtp's database is open again")
                return

    async def _reconnect_once(self) -> None:
        await self._x.call(
            self._client().db_reconnect, LOCAL_CALL_S, "reopening libxmtp's database"
        )


__all__ = ["Database"]
