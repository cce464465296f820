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
import sys

from cone.config import Settings
from cone.errors import ConeError

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
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from cone.daemon.command import settings_from
    from cone.facades._host import held_by_other

    try:
        settings = settings_from(args)
        if held_by_other(settings):
            asyncio.run(_main(settings, out_fd))
        else:
            import uvloop  # the core runs on uvloop, as in `cone daemon`

            uvloop.run(_main(settings, out_fd))
    except ConeError as err:
        print(f"cone serve: {err.message}", file=sys.stderr)
        return err.exit_code
    return 0
