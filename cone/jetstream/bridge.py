"""The JetStream bridge in the daemon: connect, lay out, export and reply, and start
over after any failure (JetStream down, a layout to fix) without touching the core,
which goes on ingesting into its own inbox meanwhile."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Final

from nats.errors import Error as NatsError

from cone.client import ConeClient
from cone.errors import ConeError
from cone.jetstream import topology
from cone.jetstream._connect import connect
from cone.jetstream.export import Exporter
from cone.jetstream.options import JetStreamOptions
from cone.jetstream.replies import Replier
from cone.jetstream.state import STATE
from cone.jetstream.subjects import Layout

log = logging.getLogger(__name__)

#: Backoff between attempts to (re)start the bridge, doubling to the bound.
RESTART_S: Final = (0.5, 10.0)


async def _run_once(options: JetStreamOptions, cone: ConeClient, laid_out: list[bool]) -> None:
    """Connect, lay out, export and reply until something fails; `laid_out` is set
    once the streams and consumers were there (the run worked)."""
    ident = await cone.identity()
    layout = Layout(options.prefix, ident.inbox_id, options.partitions)
    nc = await connect(options)
    try:
        js = nc.jetstream()
        await topology.ensure(js, layout, options)
        laid_out[0] = True
        STATE.error = None
        log.info(
            "jetstream %s: exporting consumer %r to stream %s",
            options.shown,
            options.consumer,
            layout.stream("in"),
        )
        async with asyncio.TaskGroup() as group:
            group.create_task(Exporter(cone, js, layout, options.consumer).run())
            group.create_task(Replier(cone, js, layout).run())
    finally:
        STATE.reachable = False
        with suppress(NatsError, TimeoutError):
            await nc.close()


async def _supervise(options: JetStreamOptions, socket: Path) -> None:
    delay = RESTART_S[0]
    async with ConeClient(socket) as cone:
        while True:
            laid_out = [False]
            try:
                await _run_once(options, cone, laid_out)
            except* (NatsError, ConeError, OSError, TimeoutError) as group:
                exc = group.exceptions[0]
                text = exc.message if isinstance(exc, ConeError) else type(exc).__name__
                STATE.error = text
                log.warning("jetstream %s: %s; starting over in %.1f s", options.shown, text, delay)
            if laid_out[0]:
                delay = RESTART_S[0]  # that run worked: start over soon
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_S[1])


def _ended(task: asyncio.Task[None]) -> None:
    """A bridge that ended by itself (a bug): said in the log and in status."""
    if task.cancelled() or task.exception() is None:
        return
    exc = task.exception()
    STATE.error = f"the bridge stopped: {type(exc).__name__} (see the log)"
    log.error("jetstream: the bridge stopped", exc_info=exc)


@asynccontextmanager
async def serving(options: JetStreamOptions, socket: Path) -> AsyncIterator[None]:
    """Run the bridge beside the core reachable at `socket` until the block exits."""
    STATE.enabled = True
    STATE.servers = options.shown
    STATE.consumer = options.consumer
    task = asyncio.create_task(_supervise(options, socket))
    task.add_done_callback(_ended)
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


__all__ = ["serving"]
