"""ConeService called in the process that hosts the core, without gRPC in between.

JSON-RPC on `cone.sock` is served by the daemon itself. Its calls run the very
handler the gRPC server registered for the method (cone/daemon/edge.py: the
request's checks, the proto's rules, the metrics, then the servicer), with a
context whose abort raises the ConeError a gRPC client would raise for that status.
A JSON-RPC client on the socket so sees what a gRPC client sees, without the second
trip its calls used to make: through a gRPC channel of the daemon's own, back into
the socket's splice and the gRPC server (2.2 ms of a 9.5 ms send, docs/bench.md).

A host that embeds the core (`cone serve`, `mcp`, `bridge`, a one-shot command with
no daemon running) calls it this way too (`cone.startup.reach_core`).

Calls in flight are bounded as the channel pool bounds them (`cone.limits`): long
polls (`receive`) and the rest each have their own room, so a thousand waiting
receives never delay an `identity`. When the host stops, `close` ends the calls still
running as the gRPC server's stop ends its own: each fails `daemon_unavailable`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, NoReturn

import grpc

from cone.errors import Internal, Unavailable
from cone.grpc_errors import from_code, from_status
from cone.limits import CALLS_IN_FLIGHT, LONG_POLLS_IN_FLIGHT


class _Aborted(Exception):
    def __init__(self, status: grpc.Status) -> None:
        super().__init__(status.details)
        self.status = status


class _Context:
    """What the edge and the servicer use of a gRPC servicer context."""

    def __init__(self) -> None:
        self._code: grpc.StatusCode | None = None

    async def abort_with_status(self, status: grpc.Status) -> NoReturn:
        self._code = status.code
        raise _Aborted(status)

    def code(self) -> grpc.StatusCode | None:
        return self._code


class InProcess:
    """`await caller.call("Send", request, timeout=...)`: the same contract as
    `ChannelPool.call` (raises the ConeError a gRPC client would), in process."""

    def __init__(
        self,
        handlers: Mapping[str, grpc.RpcMethodHandler],
        *,
        long_polls: int = LONG_POLLS_IN_FLIGHT,
        calls: int = CALLS_IN_FLIGHT,
    ) -> None:
        self._handlers = handlers
        self._long = asyncio.Semaphore(long_polls)
        self._short = asyncio.Semaphore(calls)
        self._running: set[asyncio.Task[Any]] = set()
        self._closed = False

    async def call(
        self, rpc: str, request: Any, timeout: float | None = None, *, long_poll: bool = False
    ) -> Any:
        """Run `rpc` (PascalCase) for `request` within `timeout` seconds."""
        handler = self._handlers.get(rpc)
        if handler is None or handler.unary_unary is None:
            raise Internal(f"ConeService has no unary method {rpc!r}")
        async with self._long if long_poll else self._short:
            if self._closed:
                raise _stopping()
            # Its own task, so that `close` can end it without cancelling the caller.
            call = asyncio.ensure_future(self._run(handler, request, timeout))
            self._running.add(call)
            call.add_done_callback(self._running.discard)
            try:
                return await asyncio.shield(call)
            except asyncio.CancelledError:
                if call.cancelled() and self._closed:
                    raise _stopping() from None
                call.cancel()  # the caller went away: so does its call, as in gRPC
                raise

    @staticmethod
    async def _run(handler: grpc.RpcMethodHandler, request: Any, timeout: float | None) -> Any:
        try:
            async with asyncio.timeout(timeout) as deadline:
                return await handler.unary_unary(request, _Context())
        except _Aborted as aborted:
            raise from_status(aborted.status) from None
        except TimeoutError:
            if not deadline.expired():
                raise
            raise from_code(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None

    async def close(self) -> None:
        """Refuse new calls and end those running (the host is stopping)."""
        self._closed = True
        for call in list(self._running):
            call.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)


def _stopping() -> Unavailable:
    return Unavailable("the core is stopping", reason="daemon_unavailable")


__all__ = ["InProcess"]
