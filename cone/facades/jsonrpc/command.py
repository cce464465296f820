"""`cone serve`: JSON-RPC 2.0 on stdin/stdout, relaying to the core or hosting it.

stdout carries only JSON-RPC lines; diagnostics go to stderr. Closing stdin (or
SIGTERM/SIGINT) ends the session: outstanding receives are cancelled (their
messages stay pending), every other call is answered, then the process exits and,
if it hosted the core, releases the identity.

Imports stay lazy: in relay mode only the client, the schema and this package load
(no uvloop, no core), so the first answer comes quickly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from cone._command import configure_logging, exit_code, run_loop
from cone.config import Settings

log = logging.getLogger("cone.serve")


async def _main(settings: Settings, out_fd: int) -> None:
    from cone.facades._host import reach_core
    from cone.facades._stdio import open_stdio
    from cone.facades.jsonrpc import Relay, run_session

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with reach_core(settings) as reached, open_stdio(out_fd) as (read, writer):
        relay = Relay(reached.pool)
        await run_session(read, writer, relay, cancel_at_close=relay.cancel_at_close, stop=stop)


def run(args: argparse.Namespace) -> int:
    """Serve until stdin closes; the exit code follows the error table in cone.errors."""
    from cone.facades._stdio import guard_stdout

    out_fd = guard_stdout()
    configure_logging(args.verbose)
    from cone.daemon.command import settings_from
    from cone.facades._host import held_by_other

    def body() -> None:
        settings = settings_from(args)
        run_loop(_main(settings, out_fd), hosting=not held_by_other(settings))

    return exit_code("serve", body)
