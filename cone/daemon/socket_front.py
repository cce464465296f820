"""The front of `cone.sock`: one socket, two protocols, owner only.

Every connection's peer credentials are checked first (only the daemon's own uid
may connect). Then the first bytes decide: the HTTP/2 connection preface of a gRPC
client is spliced to the internal grpc.aio server; anything else is a JSON-RPC line
stream, handed to the JSON-RPC handler when one is installed. The splice is two
protocols handing each other's bytes straight on (`_Relay`): a gRPC call crosses it
without waking a task.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

from cone.config import PREFACE_TIMEOUT_S

log = logging.getLogger(__name__)

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# More than a stream reader ever buffers: `read` of it returns the whole buffer.
_EVERYTHING = 1 << 30

JsonHandler = Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


class _Relay(asyncio.Protocol):
    """One end of a splice: what arrives on this end's transport is written to the
    other end's, as it arrives (no task, no stream buffer in between); a full write
    buffer on one end stops reading on the other until it drains."""

    def __init__(self, ended: asyncio.Future[None]) -> None:
        self.ended = ended
        self.transport: asyncio.Transport | None = None
        self.other: _Relay | None = None
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's do not subclass it

    def data_received(self, data: bytes) -> None:
        assert self.other is not None and self.other.transport is not None
        self.other.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        other = self.other
        assert other is not None and other.transport is not None
        if other.eof:
            self.close()
            return False
        try:
            other.transport.write_eof()
        except OSError:
            self.close()
            return False
        return True  # half-closed: the other direction goes on

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    def close(self) -> None:
        for end in (self, self.other):
            if end is not None and end.transport is not None:
                end.transport.close()
        if not self.ended.done():
            self.ended.set_result(None)


class SocketFront:
    """Serves `path`, sniffing each connection and routing it."""

    def __init__(
        self,
        path: Path,
        grpc_path: Path,
        json_handler: JsonHandler | None,
        preface_timeout_s: float = PREFACE_TIMEOUT_S,
    ) -> None:
        self.path = path
        self.grpc_path = grpc_path
        self.json_handler = json_handler
        # Once a connection has begun the HTTP/2 preface, the rest must follow within
        # this: a client that stops part-way is closed rather than held forever. (Before
        # its first byte a connection may idle: a JSON-RPC client may talk later.)
        self.preface_timeout_s = preface_timeout_s
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Bind the socket with mode 0600 (the caller holds the state lock)."""
        self.path.unlink(missing_ok=True)
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._accept, path=str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._route(reader, writer)
        except asyncio.CancelledError:
            pass  # the front is closing: the connection just ends
        except ConnectionError:
            pass  # the peer went away
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _route(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is None or peer_uid(sock) != os.getuid():
            log.warning("refused a connection from another user on %s", self.path)
            return
        head = await reader.read(len(H2_PREFACE))
        if not head:
            return
        try:
            async with asyncio.timeout(self.preface_timeout_s):
                while len(head) < len(H2_PREFACE) and H2_PREFACE.startswith(head):
                    chunk = await reader.read(len(H2_PREFACE) - len(head))
                    if not chunk:
                        return
                    head += chunk
        except TimeoutError:
            log.info("closed a connection that stopped part-way through the HTTP/2 preface")
            return
        if head == H2_PREFACE:
            await self._splice_grpc(head, reader, writer)
        elif self.json_handler is not None:
            await self.json_handler(head, reader, writer)

    async def _splice_grpc(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        down, up = _Relay(ended), _Relay(ended)
        down.other, up.other = up, down
        # The server's first bytes may come before the client's next: they go out on
        # the client's transport at once, still read by its stream until the switch.
        transport = cast(asyncio.Transport, writer.transport)
        down.transport = transport
        await loop.create_unix_connection(lambda: up, str(self.grpc_path))
        try:
            # An HTTP/2 client follows its preface with a SETTINGS frame at once, so
            # this read does not wait on the client: it takes everything the stream has
            # buffered (which one burst can take past a chunk; nothing may stay behind
            # in it), and the relay takes the connection from there.
            rest = await reader.read(_EVERYTHING)
            assert up.transport is not None
            transport.set_protocol(down)
            up.transport.write(head + rest)
            if not rest or reader.at_eof():
                down.eof_received()
            await ended
        finally:
            down.close()

    async def close(self) -> None:
        """Stop accepting, end open connections, remove the socket file."""
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
        self.path.unlink(missing_ok=True)
