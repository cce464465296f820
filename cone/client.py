"""A typed async client for ConeService on `cone.sock`: the facades' only way in.

Failed calls raise the ConeError the daemon raised (reason, field and retry hint
intact); a daemon that cannot be reached raises Unavailable(reason=daemon_unavailable).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc

from cone.errors import Unavailable
from cone.grpc_errors import from_rpc_error
from conepb.v1 import cone_pb2 as pb
from conepb.v1 import cone_pb2_grpc

_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    # One Unix socket, one peer: no need for DNS or proxies.
    ("grpc.enable_http_proxy", 0),
]


class ConeClient:
    """An open channel to one daemon. Use `async with ConeClient(path) as c:`."""

    def __init__(self, socket: Path | str, options: Sequence[tuple[str, Any]] = ()) -> None:
        """`options` are extra grpc channel arguments, after cone's defaults."""
        self.socket = Path(socket)
        self._channel = grpc.aio.insecure_channel(
            f"unix:{self.socket}", options=[*_OPTIONS, *options]
        )
        self._stub = cone_pb2_grpc.ConeServiceStub(self._channel)

    async def __aenter__(self) -> ConeClient:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        """Call RPC `method` (PascalCase) with a request message."""
        try:
            return await getattr(self._stub, method)(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # our caller cancelled us
            # grpc.aio cancels calls whose channel closed under them.
            raise Unavailable(
                "the connection to the daemon closed during the call", reason="daemon_unavailable"
            ) from None

    async def identity(self) -> pb.IdentityResponse:
        """The public identity."""
        result: pb.IdentityResponse = await self.call("Identity", pb.IdentityRequest())
        return result

    async def receive(
        self,
        consumer: str = "",
        limit: int | None = None,
        wait_ms: int = 0,
        exclude: list[str] | None = None,
    ) -> pb.ReceiveResponse:
        """Pending messages for a consumer."""
        req = pb.ReceiveRequest(
            consumer=consumer, wait_ms=wait_ms, exclude_conversation_ids=exclude or []
        )
        if limit is not None:
            req.limit = limit
        result: pb.ReceiveResponse = await self.call("Receive", req, timeout=wait_ms / 1000 + 30)
        return result

    async def ack(self, message_ids: list[str], consumer: str = "") -> int:
        """Acknowledge ids; returns how many are acknowledged."""
        result: pb.AckResponse = await self.call(
            "Ack", pb.AckRequest(message_ids=message_ids, consumer=consumer)
        )
        return int(result.acknowledged)

    async def backup(self, passphrase: str) -> AsyncIterator[pb.BackupChunk]:
        """The streamed backup: the manifest chunk, then the file's bytes."""
        try:
            async for chunk in self._stub.Backup(pb.BackupRequest(passphrase=passphrase)):
                yield chunk
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None
