"""`cone daemon`: host the core on `cone.sock` until SIGTERM or SIGINT.

A signal stops it cleanly within `cone._shutdown.STOP_BOUND_S` (10 s), or at once
on a second signal (see `cone._shutdown`).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AsyncExitStack

from cone._command import configure_logging, exit_code, run_loop
from cone.config import Settings
from cone.facades.http.options import HttpOptions
from cone.jetstream.options import JetStreamOptions


async def _main(
    settings: Settings, http: HttpOptions | None = None, jetstream: JetStreamOptions | None = None
) -> None:
    from cone._shutdown import Shutdown
    from cone.facades.jsonrpc import JsonRpcOnSocket
    from cone.startup import host_core

    # Signals are watched from the first moment: starting the core can wait on the
    # network for minutes, and a SIGTERM then must not wait for it.
    async with Shutdown("daemon") as shutdown, AsyncExitStack() as stack:
        running = await shutdown.unless_requested(
            stack.enter_async_context(
                host_core(
                    settings, create=True, json_rpc=JsonRpcOnSocket, announce="daemon", http=http
                )
            )
        )
        if running is None:
            return
        ident = running.core.status.identity()
        print(
            f"cone daemon: inbox {ident.inbox_id} ({ident.address}) on {ident.network} over "
            f"{ident.backend.upper()}, socket {running.socket}",
            file=sys.stderr,
            flush=True,
        )
        if jetstream is not None:
            # Loaded only when asked for: nats-py is the bridge's alone.
            from cone.jetstream.bridge import serving

            print(f"cone daemon: JetStream at {jetstream.shown}", file=sys.stderr, flush=True)
            await stack.enter_async_context(serving(jetstream, running.socket))
        await shutdown.requested.wait()


def run(args: argparse.Namespace) -> int:
    """Run the daemon; the exit code follows the error table in cone.errors."""
    from cone.startup import settings_from

    configure_logging(args.verbose)
    return exit_code(
        "daemon",
        lambda: run_loop(
            _main(
                settings_from(args), HttpOptions.from_args(args), JetStreamOptions.from_args(args)
            ),
            hosting=True,
        ),
    )
