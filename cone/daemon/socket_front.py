"""The front of `cone.sock`: one socket, two protocols, owner only.

Every connection's peer credentials are checked first (only the daemon's own uid
may connect). Then the first bytes decide: the HTTP/2 connection preface of a gRPC
client is spliced to the internal grpc.aio server; anything else is a JSON-RPC line
stream, handed to the JSON-RPC handler when one is installed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

log = logging.getLogger(__name__)

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_CHUNK = 256 * 1024
# Once a connection has begun the HTTP/2 preface, the rest must follow within this:
# a client that stops part-way is closed rather than held forever. (Before its first
# byte a connection may idle: a JSON-RPC client may open the socket and talk later.)
PREFACE_TIMEOUT_S = 10.0

JsonHandler = Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if not writer.is_closing():
            try:
                writer.write_eof()
            except OSError:
                writer.close()


class SocketFront:
    """Serves `path`, sniffing each connection and routing it."""

    def __init__(self, path: Path, grpc_path: Path, json_handler: JsonHandler | None) -> None:
        self.path = path
        self.grpc_path = grpc_path
        self.json_handler = json_handler
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
            async with asyncio.timeout(PREFACE_TIMEOUT_S):
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
        up_reader, up_writer = await asyncio.open_unix_connection(str(self.grpc_path))
        up_writer.write(head)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

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
