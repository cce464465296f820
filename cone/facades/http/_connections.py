"""The HTTP front's connections: counted from accept, bounded, and never the reason
`cone.sock` runs out of file descriptors.

The front accepts connections itself (not asyncio's server), so that each one counts
against the bound from `accept` until it closes, a TLS handshake included, and so
that any of them, mid-handshake too, can be closed. A TLS handshake has its own short
deadline. A connection must send a request's headers within the header deadline of
its accept (handshake included) or of its previous answer. At the bound, a new
connection takes the place of the one that has waited longest for its request's
headers (a slow or silent client, a handshake that does not finish, an idle
keep-alive): a client that sends its request at once is served however many slow
ones there are, and a running request (an event stream, a long poll) is never
evicted. When every connection runs a request, a new one is closed at once. The same
holds when fewer than `FD_HEADROOM` file descriptors remain under the process's
limit, whatever the count: the HTTP front gives way first (it evicts or refuses), so
the daemon's Unix socket keeps answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

log = logging.getLogger(__name__)

# File descriptors kept free for everything but the HTTP front (cone.sock's clients,
# the store, libxmtp): under this many free, HTTP connections are evicted or refused.
FD_HEADROOM: Final = 64
_FD_DIR: Final = "/proc/self/fd"
# Seconds before accepting again after accept itself failed (out of descriptors).
_ACCEPT_RETRY_S: Final = 0.1


def free_fds() -> int | None:
    """File descriptors this process may still open (None where it cannot tell)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        used = len(os.listdir(_FD_DIR)) - 1  # listing it opens one
    except OSError:
        return None
    return int(soft) - used


class _Connection:
    """One accepted connection, from accept until it closes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.app: Any = None  # aiohttp's RequestHandler once the connection is served
        self.transport: asyncio.BaseTransport | None = None
        self.task: asyncio.Task[None] | None = None
        #: Since when it waits for a request's headers (None while a request runs).
        self.waiting_since: float | None = None
        self.timer: asyncio.TimerHandle | None = None

    def abort(self) -> None:
        """Close at once: mid-handshake too (the socket is shut, the handshake fails)."""
        if self.app is not None:
            self.app.force_close()
        if self.transport is not None:
            self.transport.abort()  # type: ignore[attr-defined]  # a stream transport
        else:
            with contextlib.suppress(OSError):  # already closed
                self.sock.shutdown(socket.SHUT_RDWR)


class _Gate(asyncio.Protocol):
    """The protocol of a connection (after its TLS handshake, if any): aiohttp's
    handler behind it, told of everything; its end is the connection's end."""

    def __init__(self, owner: Connections, conn: _Connection) -> None:
        self.owner = owner
        self.conn = conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.conn.transport = transport
        self.conn.app = self.owner.server()
        self.owner.by_app[self.conn.app] = self.conn
        self.conn.app.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.conn.app.data_received(data)

    def eof_received(self) -> bool | None:
        return self.conn.app.eof_received()  # type: ignore[no-any-return]

    def pause_writing(self) -> None:
        self.conn.app.pause_writing()

    def resume_writing(self) -> None:
        self.conn.app.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner.forget(self.conn)
        self.conn.app.connection_lost(exc)


class Connections:
    """Accepts the front's connections (see the module docstring)."""

    def __init__(
        self,
        limit: int,
        header_timeout: float,
        handshake_timeout: float,
        tls: ssl.SSLContext | None = None,
        fd_headroom: int = FD_HEADROOM,
    ) -> None:
        #: aiohttp's web.Server (set once its runner is set up): calling it makes a
        #: RequestHandler, one per served connection.
        self.server: Any = None
        self.limit = limit
        self.header_timeout = header_timeout
        self.handshake_timeout = handshake_timeout
        self.tls = tls
        self.fd_headroom = fd_headroom
        self.open: dict[_Connection, None] = {}  # in accept order
        self.by_app: dict[Any, _Connection] = {}

    async def serve(self, listening: socket.socket) -> None:
        """Accept on `listening` until cancelled."""
        loop = asyncio.get_running_loop()
        listening.setblocking(False)
        while True:
            try:
                sock, _address = await loop.sock_accept(listening)
            except OSError as exc:  # out of descriptors: cone.sock comes first
                log.warning("HTTP: accept failed: %s", exc)
                await asyncio.sleep(_ACCEPT_RETRY_S)
                continue
            self._admit(sock)

    def _admit(self, sock: socket.socket) -> None:
        free = free_fds()
        short = free is not None and free < self.fd_headroom
        if (short or len(self.open) >= self.limit) and not self._evict():
            if short:
                log.warning("HTTP: refused a connection: %s file descriptors left", free)
            else:
                log.info("HTTP: refused a connection over the bound of %d", self.limit)
            sock.close()
            return
        conn = _Connection(sock)
        self.open[conn] = None
        self.wait(conn)
        conn.task = asyncio.ensure_future(self._connect(conn))

    async def _connect(self, conn: _Connection) -> None:
        """Hand the socket to a transport (TLS: after its handshake, under its deadline)."""
        loop = asyncio.get_running_loop()
        try:
            if self.tls is None:
                await loop.connect_accepted_socket(lambda: _Gate(self, conn), conn.sock)
            else:
                await loop.connect_accepted_socket(
                    lambda: _Gate(self, conn),
                    conn.sock,
                    ssl=self.tls,
                    ssl_handshake_timeout=self.handshake_timeout,
                )
        except OSError as exc:  # a failed, timed-out or shut handshake
            # The loop's transport owns the socket now and closes it.
            log.debug("HTTP: connection ended before it was served: %s", exc)
            self.forget(conn)

    def _evict(self) -> bool:
        """Close the connection that has waited longest for its request's headers;
        False when every connection runs a request."""
        waiting = [c for c in self.open if c.waiting_since is not None]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c.waiting_since or 0.0)
        log.info("HTTP: at the bound, closed the connection that waited longest")
        self.forget(oldest)
        oldest.abort()
        return True

    def wait(self, conn: _Connection) -> None:
        """The connection waits for a request's headers, under the header deadline."""
        self._stop_timer(conn)
        loop = asyncio.get_running_loop()
        conn.waiting_since = loop.time()
        conn.timer = loop.call_later(self.header_timeout, self._expire, conn)

    def running(self, conn: _Connection) -> None:
        """A request's headers arrived: it runs, with no deadline of this module's."""
        self._stop_timer(conn)
        conn.waiting_since = None

    def _stop_timer(self, conn: _Connection) -> None:
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None

    def _expire(self, conn: _Connection) -> None:
        conn.timer = None
        # Mostly a browser's or curl's idle keep-alive (or a speculative preconnect):
        # nothing to act on, so debug only; the bound on connections is what protects.
        log.debug("HTTP: closed a connection that sent no complete request in time")
        self.forget(conn)
        conn.abort()

    def forget(self, conn: _Connection) -> None:
        """The connection closed (or is closing): it no longer counts."""
        self._stop_timer(conn)
        self.open.pop(conn, None)
        if conn.app is not None:
            self.by_app.pop(conn.app, None)

    @web.middleware
    async def middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        """No deadline while a request runs; the next request's starts at its answer."""
        conn = self.by_app.get(request.protocol)
        if conn is not None:
            self.running(conn)
        try:
            return await handler(request)
        finally:
            if conn is not None and conn in self.open:
                self.wait(conn)

    async def close(self) -> None:
        """Close connections aiohttp does not hold yet (handshakes); stop every deadline.
        aiohttp's runner closes the ones it serves."""
        tasks = []
        for conn in list(self.open):
            self._stop_timer(conn)
            if conn.app is None:
                self.forget(conn)
                conn.abort()
                if conn.task is not None:
                    conn.task.cancel()
                    tasks.append(conn.task)
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["FD_HEADROOM", "Connections", "free_fds"]
