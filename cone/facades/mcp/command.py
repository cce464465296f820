"""`cone mcp`: MCP over stdio, relaying to the core or hosting it, like `cone serve`.

stdout carries only MCP: as in `cone serve`, fd 1 points at stderr for the whole
life of the process and MCP goes to a private duplicate of the real stdout. (The SDK
diverts fd 1 only while serving; libxmtp's native logger writes to fd 1, also while
the core shuts down after serving.) The server exits when stdin closes, stopping the
core and releasing the identity if it hosted them.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from cone._command import configure_logging, exit_code
from cone.config import Settings


async def _main(settings: Settings, out_fd: int) -> None:
    from typing import Any, cast

    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from cone.facades._host import reach_core
    from cone.facades._stdio import open_stdio
    from cone.facades.jsonrpc import Caller
    from cone.facades.mcp import build_server
    from cone.facades.mcp._stdio import LineSink, LineSource

    @asynccontextmanager
    async def lifespan(server: Server[Caller]) -> AsyncIterator[Caller]:
        async with reach_core(settings) as reached:
            yield reached.pool

    server = build_server(lifespan)
    async with open_stdio(out_fd) as (read, writer):
        # Duck-typed for the SDK's AsyncFile[str] (it uses only these calls).
        stdin, stdout = cast(Any, LineSource(read)), cast(Any, LineSink(writer))
        async with stdio_server(stdin=stdin, stdout=stdout) as (reading, writing):
            await server.run(reading, writing, server.create_initialization_options())


def run(args: argparse.Namespace) -> int:
    """Serve MCP until stdin closes; the exit code follows the error table in cone.errors."""
    from cone.facades._stdio import guard_stdout

    out_fd = guard_stdout()
    configure_logging(args.verbose)
    import anyio

    from cone.daemon.command import settings_from
    from cone.facades._host import held_by_other

    def body() -> None:
        settings = settings_from(args)
        # The core runs on uvloop, as in `cone daemon`; a relay needs no more than asyncio.
        anyio.run(
            _main, settings, out_fd, backend="asyncio",
            backend_options={"use_uvloop": not held_by_other(settings)},
        )  # fmt: skip

    return exit_code("mcp", body)
