"""Failpoints: named places where a test can stop a real process to crash it there.

With `CONE_FAILPOINT=<name>` and `CONE_FAILPOINT_FILE=<path>` in its environment, a
process that reaches the failpoint `<name>` creates the file and then waits forever,
so that a test can `kill -9` it at exactly that point. With `CONE_FAILPOINT_RELEASE=<path>`
as well it waits only until that file exists (a test holding a slow step back), and
goes on. Without them (always, outside tests) `reached` returns at once.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path


async def reached(name: str) -> None:
    """Stop here (forever, or until released) when the environment names this failpoint.

    `CONE_FAILPOINT` may name several, comma-separated (a test holding two steps):
    then each one's file and release path are the given ones with `-<name>` appended."""
    names = os.environ.get("CONE_FAILPOINT", "").split(",")
    if name not in names:
        return
    suffix = f"-{name}" if len(names) > 1 else ""
    marker = os.environ.get("CONE_FAILPOINT_FILE")
    if marker:
        await asyncio.to_thread(Path(marker + suffix).touch)
    release = os.environ.get("CONE_FAILPOINT_RELEASE")
    if release:
        release += suffix
    if not release:
        await asyncio.Event().wait()
        return
    while True:
        if await asyncio.to_thread(Path(release).exists):
            return
        await asyncio.sleep(0.05)


def armed(name: str) -> int | None:
    """When the environment names this failpoint: how many writes it gathers before
    it stops (`CONE_FAILPOINT_GROUP`, default 2); else None. For a failpoint on a
    thread that gathers work first (the store's group commit)."""
    if os.environ.get("CONE_FAILPOINT") != name:
        return None
    return int(os.environ.get("CONE_FAILPOINT_GROUP", "2"))


def reached_now(name: str) -> None:
    """`reached` for a worker thread: block this thread forever when the environment
    names this failpoint."""
    if os.environ.get("CONE_FAILPOINT") != name:
        return
    marker = os.environ.get("CONE_FAILPOINT_FILE")
    if marker:
        Path(marker).touch()
    threading.Event().wait()
