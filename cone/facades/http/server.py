"""The HTTP front's server: aiohttp in the daemon's event loop, beside `cone.sock`.

`bind(options)` takes the port first, before anything of the identity is made (a
busy port fails in one line, `address_in_use`, leaving a fresh home as it was);
`serving(options, home, caller, sock=...)` serves on it until the block exits, then closes
every connection. Calls go through `caller`: the daemon's in-process calls into the
handlers its gRPC server runs (cone/daemon/in_process.py), as JSON-RPC on `cone.sock`
does, so the gRPC edge checks and counts them like any other.
"""

from __future__ import annotations

import asyncio
import logging
import socket as socketlib
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from cone.errors import os_failure
from cone.facades.http import _guard
from cone.facades.http._connections import Connections
from cone.facades.http._guard import Policy
from cone.facades.http._routes import Routes
from cone.facades.http._token import TOKEN_FILE, forget_url, load_or_create, login_url, write_url
from cone.facades.http.options import HttpOptions
from cone.facades.jsonrpc import Caller, Relay

log = logging.getLogger(__name__)

# Seconds open connections get to finish when the front closes.
SHUTDOWN_S = 1.0
# Idle keep-alive connections close after this.
KEEPALIVE_S = 15.0
# Seconds a connection whose request body was not read in full may linger.
LINGER_S = 2.0


@dataclass(frozen=True)
class Serving:
    """A running HTTP front."""

    url: str
    port: int
    token_file: Path


def _tls(options: HttpOptions) -> ssl.SSLContext | None:
    if options.cert is None or options.key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(options.cert, options.key)
    return context


def bind(options: HttpOptions) -> socketlib.socket:
    """The front's listening socket; TargetError (`address_in_use`, `not_writable`)
    when the address cannot be taken."""
    family = socketlib.AF_INET6 if ":" in options.host else socketlib.AF_INET
    try:
        return socketlib.create_server((options.host, options.port), family=family, backlog=128)
    except OSError as exc:
        raise os_failure(exc, f"--http {options.host}:{options.port}") from None


@asynccontextmanager
async def serving(
    options: HttpOptions, home: Path, caller: Caller, *, sock: socketlib.socket | None = None
) -> AsyncIterator[Serving]:
    """Serve the HTTP front for the core `caller` calls until the block exits, on `sock`
    (from `bind`, closed here) or on the port `options` name."""
    if sock is None:
        sock = bind(options)
    try:
        token = load_or_create(home)
        tls = _tls(options)
    except BaseException:
        sock.close()
        raise
    port = int(sock.getsockname()[1])
    policy = Policy(options, port, token)
    relay = Relay(caller)
    app = web.Application(client_max_size=_guard.MAX_BODY_BYTES)
    runner = web.AppRunner(
        app,
        handler_cancellation=True,  # a client that goes away cancels its call
        access_log=None,
        logger=_guard.PROTOCOL_LOG,
        shutdown_timeout=SHUTDOWN_S,
        keepalive_timeout=KEEPALIVE_S,
        # After an answer to a request whose body was not read, aiohttp reads (and
        # drops) the rest for at most this long before closing.
        lingering_time=LINGER_S,
        max_line_size=8190,
        max_field_size=8190,
    )
    connections = Connections(
        _guard.MAX_CONNECTIONS, _guard.HEADER_TIMEOUT_S, _guard.HANDSHAKE_TIMEOUT_S, tls
    )
    app.middlewares.extend([connections.middleware, policy.middleware])
    app.on_response_prepare.append(_guard.no_store)
    Routes(relay, policy.authorized).add_to(app)
    accepting: asyncio.Task[None] | None = None
    url = ""
    try:
        await runner.setup()
        connections.server = runner.server
        # The front accepts itself: each connection counts from accept, its TLS
        # handshake included (`_connections`).
        accepting = asyncio.ensure_future(connections.serve(sock))
        host = f"[{options.host}]" if ":" in options.host else options.host
        url = f"{'https' if tls else 'http'}://{host}:{port}/"
        notice = f"cone: HTTP on {url} (bearer token in {home / TOKEN_FILE})"
        if not options.loopback and tls is None:
            notice += (
                "; WARNING: plain HTTP on a non-loopback address (--http-insecure): the "
                "token and every message cross the network in clear"
            )
        print(notice, file=sys.stderr, flush=True)
        # The console's login URL, once, as Jupyter does; `cone web` prints it again.
        print(f"cone: web console at {login_url(url, token)}", file=sys.stderr, flush=True)
        write_url(home, url)
        yield Serving(url, port, home / TOKEN_FILE)
    finally:
        if url:
            forget_url(home, url)
        if accepting is not None:
            accepting.cancel()
            await asyncio.gather(accepting, return_exceptions=True)
        sock.close()
        await connections.close()
        await runner.cleanup()


__all__ = ["Serving", "bind", "serving"]
