"""`cone mcp`: MCP over stdio, relaying to the core or hosting it, like `cone serve`.

stdout carries only MCP: as in `cone serve`, fd 1 points at stderr for the whole
life of the process and MCP goes to a private duplicate of the real stdout. (The SDK
diverts fd 1 only while serving; libxmtp's native logger writes to fd 1, also while
the core shuts down after serving.) The server exits when stdin closes, stopping the
core and releasing the identity if it hosted them; so does SIGTERM or SIGINT. If the
core cannot start, every tool call is an error result naming the reason (an MCP
server stays for its host) until stdin closes; the exit code is then the failure's.
"""

from __future__ import annotations

import argparse

from cone._command import configure_logging, exit_code
from cone.config import Settings
from cone.facades.http.options import HttpOptions


async def _main(settings: Settings, out_fd: int, http: HttpOptions | None = None) -> None:
    from typing import Any, cast

    from mcp.server.stdio import stdio_server

    from cone._shutdown import Shutdown
    from cone.facades._stdio import open_stdio, until_set
    from cone.facades.mcp import build_server, fixed_lifespan
    from cone.facades.mcp._stdio import LineSink, LineSource
    from cone.startup import core_in_background

    # The core is reached in the background, outside the SDK's lifespan: the session
    # answers at once, tool calls wait for the core (or fail with the reason it could
    # not start), and a signal ends the input as closing stdin does.
    async with (
        Shutdown("mcp") as shutdown,
        open_stdio(out_fd) as (read, writer),
        core_in_background(
            settings, shutdown.requested, end_on_failure=False, command="mcp", http=http
        ) as core,
    ):
        server = build_server(fixed_lifespan(core))
        # Duck-typed for the SDK's AsyncFile[str] (it uses only these calls).
        source = LineSource(until_set(read, shutdown.requested), writer)
        stdin, stdout = cast(Any, source), cast(Any, LineSink(writer))
        async with stdio_server(stdin=stdin, stdout=stdout) as (reading, writing):
            await server.run(reading, writing, server.create_initialization_options())


def run(args: argparse.Namespace) -> int:
    """Serve MCP until stdin closes; the exit code follows the error table in cone.errors."""
    from cone.facades._stdio import guard_stdout

    out_fd = guard_stdout()
    configure_logging(args.verbose)
    import anyio

    from cone.startup import held_by_other, settings_from

    def body() -> None:
        settings = settings_from(args)
        http = HttpOptions.from_args(args)
        # The core runs on uvloop, as in `cone daemon`; a relay needs no more than asyncio.
        anyio.run(
            _main, settings, out_fd, http, backend="asyncio",
            backend_options={"use_uvloop": not held_by_other(settings)},
        )  # fmt: skip

    return exit_code("mcp", body)
