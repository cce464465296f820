"""In-memory JSON-RPC sessions for unit tests: lines in, answers out, no sockets.

The fake core (`FakeCore`) is for pure-logic tests of framing, dispatch and schema
only; like the daemon's gRPC edge, it checks each request's proto rules first
(`cone.daemon.validation.check`). Everything end to end runs against a real daemon on
the devnet.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from cone.facades.jsonrpc import LineWriter, Relay, run_session
from cone.rules import check
from cone.schema import methods
from conepb.v1 import cone_pb2 as pb

WAIT_S = 10.0

Behaviour = Callable[[Any], Awaitable[Any]]


class FakeCore:
    """Answers every RPC with its empty response, unless told otherwise."""

    def __init__(self) -> None:
        self.behaviours: dict[str, Behaviour] = {}
        self.calls: list[tuple[str, Any]] = []
        self.cancelled: list[str] = []
        self._cancel_seen = asyncio.Event()

    async def wait_cancelled(self, *rpcs: str, timeout: float = WAIT_S) -> None:
        """Wait until the calls cancelled so far are `rpcs`, in order."""
        async with asyncio.timeout(timeout):
            while self.cancelled != list(rpcs):
                self._cancel_seen.clear()
                await self._cancel_seen.wait()

    async def call(
        self, rpc: str, request: Any, timeout: float | None = None, *, long_poll: bool = False
    ) -> Any:
        check(request)
        self.calls.append((rpc, request))
        behaviour = self.behaviours.get(rpc)
        try:
            if behaviour is not None:
                return await behaviour(request)
            return getattr(pb, f"{rpc}Response")()
        except asyncio.CancelledError:
            self.cancelled.append(rpc)
            self._cancel_seen.set()
            raise


class _Sink:
    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def write(self, data: bytes) -> None:
        self.wire.raw.extend(data)
        self.wire.arrived.set()

    async def drain(self) -> None:
        return None


class Wire:
    """One session over in-memory streams."""

    def __init__(self, handler: Any = None, core: FakeCore | None = None) -> None:
        self.core = core or FakeCore()
        relay = Relay(self.core)
        self.handler = handler or relay
        self._input: asyncio.Queue[bytes] = asyncio.Queue()
        self.raw = bytearray()
        self.arrived = asyncio.Event()
        self.writer = LineWriter(_Sink(self))
        self.task = asyncio.ensure_future(
            run_session(
                self._read, self.writer, self.handler, cancel_at_close=relay.cancel_at_close
            )
        )
        self._taken = 0

    async def _read(self, n: int) -> bytes:
        return await self._input.get()

    def send_raw(self, data: bytes) -> None:
        """Bytes onto the input, as they are."""
        self._input.put_nowait(data)

    def send(self, message: Any) -> None:
        """One JSON message as a line."""
        self.send_raw(json.dumps(message).encode() + b"\n")

    def request(self, id_: Any, method: str, params: Any = None) -> None:
        """A request line."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def lines(self) -> list[bytes]:
        """Complete output lines so far."""
        return bytes(self.raw).split(b"\n")[:-1]

    async def answers(self, count: int, timeout: float = WAIT_S) -> list[Any]:
        """The next `count` answers, parsed, waiting for them."""
        async with asyncio.timeout(timeout):
            while len(self.lines()) < self._taken + count:
                self.arrived.clear()
                await self.arrived.wait()
        out = [json.loads(line) for line in self.lines()[self._taken : self._taken + count]]
        self._taken += count
        return out

    async def answer(self, timeout: float = WAIT_S) -> Any:
        """The next answer."""
        return (await self.answers(1, timeout))[0]

    async def close(self, timeout: float = WAIT_S) -> list[Any]:
        """End the input, wait for the session to end; the answers not yet taken."""
        self.send_raw(b"")
        async with asyncio.timeout(timeout):
            await self.task
        rest = [json.loads(line) for line in self.lines()[self._taken :]]
        self._taken = len(self.lines())
        return rest


def all_methods() -> list[str]:
    """Every JSON-RPC method name."""
    return list(methods())
