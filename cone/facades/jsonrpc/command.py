"""`cone serve`: JSON-RPC 2.0 on stdin/stdout, relaying to the core or hosting it.

stdout carries only JSON-RPC lines; diagnostics go to stderr. Closing stdin (or
SIGTERM/SIGINT) ends the session: outstanding receives are cancelled (their
messages stay pending), every other call is answered, then the process exits and,
if it hosted the core, releases the identity.

If the core cannot start (no network on a first start, a wrong key, ...), every
request read is answered with -32001 `daemon_unavailable` (the start failure's
reason as `data.cause`), then the process exits with the failure's exit code.

Imports stay lazy: in relay mode only the client, the schema and this package load
(no uvloop, no core), so the first answer comes quickly.
"""

from __future__ import annotations

import argparse
import logging

from cone._command import configure_logging, exit_code, run_loop
from cone.config import Settings
from cone.facades.http.options import HttpOptions

log = logging.getLogger("cone.serve")


async def _main(settings: Settings, out_fd: int, http: HttpOptions | None = None) -> None:
    from cone._shutdown import Shutdown
    from cone.facades._stdio import open_stdio
    from cone.facades.jsonrpc import Relay, run_session
    from cone.startup import core_in_background

    # stdio first, the core in the background: every request read gets an answer,
    # an error one when the core cannot start (then the start failure's exit code).
    async with (
        Shutdown("serve") as shutdown,
        open_stdio(out_fd) as (read, writer),
        core_in_background(
            settings, shutdown.requested, end_on_failure=True, command="serve", http=http
        ) as core,
    ):
        relay = Relay(core)
        await run_session(
            read, writer, relay, cancel_at_close=relay.cancel_at_close, stop=shutdown.requested
        )


def run(args: argparse.Namespace) -> int:
    """Serve until stdin closes; the exit code follows the error table in cone.errors."""
    from cone.facades._stdio import guard_stdout

    out_fd = guard_stdout()
    configure_logging(args.verbose)
    from cone.startup import held_by_other, settings_from

    def body() -> None:
        settings = settings_from(args)
        http = HttpOptions.from_args(args)
        run_loop(_main(settings, out_fd, http), hosting=not held_by_other(settings))

    return exit_code("serve", body)
