"""The web console's static files: one HTML page, its ES modules, style sheet and icon.

They hold no secret and no peer content: the page reads the token from the login URL's
fragment (never sent to the server) and makes every call itself, to `/api/v1/rpc` and
`/api/v1/events`, with the bearer token. Each file is served with a strict
Content-Security-Policy (scripts and styles from this origin only, no inline code, no
frames, no forms, connections to this origin only), `nosniff`, and no referrer.
docs/web.md describes the console and its defences.
"""

from __future__ import annotations

from importlib import resources
from typing import Final

from aiohttp import web

CSP: Final = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
# name -> content type; nothing else is served.
FILES: Final = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "render.js": "text/javascript; charset=utf-8",
    "history.js": "text/javascript; charset=utf-8",
    "composer.js": "text/javascript; charset=utf-8",
    "groups.js": "text/javascript; charset=utf-8",
    "people.js": "text/javascript; charset=utf-8",
    "lists.js": "text/javascript; charset=utf-8",
    "request.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}


def _read(name: str) -> bytes:
    return resources.files("cone.facades.http").joinpath("console", name).read_bytes()


async def index(request: web.Request) -> web.Response:
    """`/`: the console's page."""
    return _file("index.html")


async def favicon(request: web.Request) -> web.Response:
    """`/favicon.ico`: what a browser asks for by itself, with no token; the console's
    icon (an SVG, which browsers take under this name too) rather than a 401."""
    return _file("icon.svg")


async def asset(request: web.Request) -> web.Response:
    """`/console/NAME`: a script module or the style sheet."""
    name = request.match_info["name"]
    if name not in FILES or name == "index.html":
        raise web.HTTPNotFound(headers=SECURITY_HEADERS)
    return _file(name)


def _file(name: str) -> web.Response:
    return web.Response(body=_read(name), headers={**SECURITY_HEADERS, "Content-Type": FILES[name]})


def add_to(app: web.Application) -> None:
    """Register the console's routes on `app`."""
    app.router.add_get("/", index)
    app.router.add_get("/favicon.ico", favicon)
    app.router.add_get("/console/{name}", asset)


__all__ = ["CSP", "SECURITY_HEADERS", "add_to"]
