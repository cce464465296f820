"""What every request passes before a route runs, and bounds on connections.

In order: the Host header must name this front (DNS rebinding: a page on an attacker's
name that resolves to 127.0.0.1 sends its own name); CORS answers only configured
origins; a state-changing request (anything but GET, HEAD and OPTIONS) with an Origin
must come from this front's own origin or a configured one (CSRF); then the bearer
token, on everything but health and the web console's static files. Bodies are bounded
in size (aiohttp's `client_max_size`) and read time; connections are bounded by
`_connections`, with the numbers set here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from cone.facades.http._token import matches
from cone.facades.http.options import HttpOptions

log = logging.getLogger(__name__)

# Connections at once, counted from accept (cone.facades.http._connections).
MAX_CONNECTIONS: Final = 64
# Seconds a connection has to send a request's headers, from accept (its TLS handshake
# included) or from its previous answer.
HEADER_TIMEOUT_S: Final = 10.0
# Seconds a TLS handshake may take.
HANDSHAKE_TIMEOUT_S: Final = 5.0
BODY_TIMEOUT_S: Final = 30.0
# The JSON-RPC line limit of stdio, so a request that fits there fits here.
MAX_BODY_BYTES: Final = 16 * 1024 * 1024
OPEN_PATHS: Final = frozenset({"/api/v1/health", "/", "/favicon.ico"})
# The web console's static files: no secret in them, and a browser cannot send a bearer
# token when it navigates; the console's own calls carry the token (docs/web.md).
OPEN_PREFIXES: Final = ("/console/",)
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Policy:
    """The checks, for one front bound to `port`."""

    def __init__(self, options: HttpOptions, port: int, token: str) -> None:
        self.token = token
        self.cors = frozenset(options.cors_origins)
        names = {options.host, *options.host_names}
        if options.loopback:
            names |= {"localhost", "127.0.0.1", "::1"}
        default_port = 443 if options.tls else 80
        self.hosts = frozenset(
            {_host_port(n, port) for n in names}
            | ({n if ":" not in n else f"[{n}]" for n in names} if port == default_port else set())
        )
        scheme = "https" if options.tls else "http"
        self.origins = frozenset(f"{scheme}://{h}" for h in self.hosts) | self.cors

    def host_ok(self, request: web.Request) -> bool:
        """Whether the Host header names this front."""
        return request.headers.get("Host", "").lower() in self.hosts

    def authorized(self, request: web.Request) -> bool:
        """Whether the request carries the token (`Authorization: Bearer TOKEN`)."""
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and matches(given.strip(), self.token)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The checks of the module docstring, in that order."""
        if not self.host_ok(request):
            return _refuse(421, "the Host header does not name this server")
        origin = request.headers.get("Origin")
        if request.method == "OPTIONS":
            if origin is not None and origin in self.cors:
                return _cors(web.Response(status=204), origin, preflight=True)
            return _refuse(403, "cross-origin requests are not allowed from this origin")
        if origin is not None and request.method not in _SAFE_METHODS:
            if origin not in self.origins:
                return _refuse(403, "cross-origin requests are not allowed from this origin")
        if not _open(request.path) and not self.authorized(request):
            refused = _refuse(401, "missing or wrong bearer token (see docs/http.md)")
            refused.headers["WWW-Authenticate"] = 'Bearer realm="cone"'
            return refused
        response = await handler(request)
        if origin is not None and origin in self.cors and not response.prepared:
            _cors(response, origin, preflight=False)
        return response


async def no_store(_request: web.Request, response: web.StreamResponse) -> None:
    """Every answer, API and refusals included: never cached (a shared cache or the
    browser's disk would keep messages and tokens' effects), never sniffed as another
    type. The console's files set their own headers first; these fill what is missing."""
    response.headers.setdefault("Cache-Control", "no-store")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")


def _open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def _refuse(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _cors(response: web.StreamResponse, origin: str, *, preflight: bool) -> web.StreamResponse:
    response.headers["Access-Control-Allow-Origin"] = origin
    response.headers["Vary"] = "Origin"
    if preflight:
        response.headers["Access-Control-Allow-Methods"] = "GET, POST"
        response.headers["Access-Control-Allow-Headers"] = (
            "Authorization, Content-Type, Last-Event-ID"
        )
        response.headers["Access-Control-Max-Age"] = "600"
    return response


class _Malformed(logging.Filter):
    """aiohttp answers a request it cannot parse (a NUL or a non-ASCII byte in a
    header, a bad request line) with 400 and logs its traceback as an error: any
    client could fill the log. Such a record becomes one line at INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], HttpProcessingError):
            reason = str(record.exc_info[1]).splitlines()[0]
            record.msg, record.args = "HTTP: refused a malformed request (%s)", (reason,)
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info, record.exc_text = None, None
        return True


#: The logger aiohttp's server writes to (AppRunner's `logger`).
PROTOCOL_LOG: Final = logging.getLogger("cone.facades.http.protocol")
PROTOCOL_LOG.addFilter(_Malformed())


__all__ = [
    "BODY_TIMEOUT_S",
    "HANDSHAKE_TIMEOUT_S",
    "HEADER_TIMEOUT_S",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "PROTOCOL_LOG",
    "Policy",
    "no_store",
]
