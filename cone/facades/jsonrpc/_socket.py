"""JSON-RPC on `cone.sock`: the handler the socket front calls for non-gRPC clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from cone.facades._pool import ChannelPool
from cone.facades.jsonrpc._framing import LineWriter
from cone.facades.jsonrpc._relay import Caller, Relay
from cone.facades.jsonrpc._session import run_session


class JsonRpcOnSocket:
    """A `json_handler` for `running_core`: one JSON-RPC session per connection.

    Calls are relayed through `caller` (a pool on the same socket), so a client on
    the socket sees exactly what `cone serve` answers.
    """

    def __init__(self, caller: Caller) -> None:
        self.relay = Relay(caller)

    async def __call__(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await run_session(
            reader.read,
            LineWriter(writer),
            self.relay,
            head=head,
            cancel_at_close=self.relay.cancel_at_close,
        )


@asynccontextmanager
async def json_handler_for(socket: Path) -> AsyncIterator[JsonRpcOnSocket]:
    """The JSON-RPC handler for the core served on `socket`, with its channel pool."""
    async with ChannelPool(socket) as pool:
        yield JsonRpcOnSocket(pool)


__all__ = ["JsonRpcOnSocket", "json_handler_for"]
