"""What the benches against the official Node SDK share: one devnet subprocess, the
SDK's peer process when it is installed, the load average around the run, and the
figures alone on stdout (libxmtp logs on fd 1)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.devnet_process import DevnetProcess
from support.node_peer import NodePeer, sdk_available

Run = Callable[[argparse.Namespace, str, Path, NodePeer | None], Awaitable[None]]
SKIPPED = "  Node SDK: skipped (no node, or tests/node not installed: npm ci --prefix tests/node)"


async def _against_sdk(run: Run, args: argparse.Namespace) -> None:
    print("load average at the start: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        node = await DevnetProcess.start(work)
        try:
            if sdk_available():
                async with NodePeer.start(node.url, work) as sdk:
                    await run(args, node.url, work, sdk)
            else:
                await run(args, node.url, work, None)
        finally:
            await node.stop()
    print("load average at the end: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))


def against_sdk(run: Run, args: argparse.Namespace) -> None:
    """`run(args, devnet_url, work_dir, sdk_or_None)`, its figures alone on stdout."""
    figures_only(lambda: asyncio.run(_against_sdk(run, args)))


def figures_only(main: Callable[[], None]) -> None:
    """Run `main` with stdout kept for the figures; libxmtp's lines on fd 1 go to stderr."""
    sys.stdout.flush()
    figures = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    with contextlib.redirect_stdout(figures):
        main()
    figures.close()
