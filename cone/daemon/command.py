"""`cone daemon`: host the core on `cone.sock` until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from cone._command import configure_logging, exit_code, run_loop
from cone.config import Settings


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the common state/network flags."""
    return Settings.resolve(
        home=args.home,
        network=args.network,
        api_url=args.api_url,
        key_file=args.key_file,
        wallet_key_file=getattr(args, "wallet_key_file", None),
    )


async def _main(settings: Settings) -> None:
    from cone.daemon.runtime import running_core
    from cone.facades.jsonrpc import json_handler_for

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with (
        json_handler_for(settings.paths.socket) as json_handler,
        running_core(settings, json_handler=json_handler) as running,
    ):
        ident = running.core.identity
        print(
            f"cone daemon: inbox {ident.inbox_id} ({ident.address}) on {ident.network}, "
            f"socket {running.socket}",
            file=sys.stderr,
            flush=True,
        )
        await stop.wait()


def run(args: argparse.Namespace) -> int:
    """Run the daemon; the exit code follows the error table in cone.errors."""
    configure_logging(args.verbose)
    return exit_code("daemon", lambda: run_loop(_main(settings_from(args)), hosting=True))
