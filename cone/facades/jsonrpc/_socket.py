"""JSON-RPC on `cone.sock`: the handler the socket front calls for non-gRPC clients."""

from __future__ import annotations

import asyncio

from cone.facades.jsonrpc._framing import LineWriter
from cone.facades.jsonrpc._relay import Caller, Relay
from cone.facades.jsonrpc._session import run_session


class JsonRpcOnSocket:
    """A `json_handler` for the socket front: one JSON-RPC session per connection.

    Calls go through `caller`: the daemon's in-process calls (cone/daemon/in_process.py,
    the handlers its gRPC server runs), so a client on the socket sees exactly what a
    gRPC client and `cone serve` see.
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


__all__ = ["JsonRpcOnSocket"]
