"""A session: framing and dispatch joined over one byte stream until its input ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from cone.facades.jsonrpc._dispatch import Dispatcher, Handler
from cone.facades.jsonrpc._framing import TOO_LONG, LineWriter, Read, read_lines

log = logging.getLogger(__name__)


async def run_session(
    read: Read,
    writer: LineWriter,
    handler: Handler,
    *,
    head: bytes = b"",
    cancel_at_close: Callable[[str], bool] = lambda method: False,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve JSON-RPC lines from `read` to `writer` until input ends (or `stop` is set).

    At the end, long polls still outstanding are cancelled and every other call is
    answered before this returns. If the writer's other end goes away, everything
    outstanding is cancelled. Cancelling this coroutine cancels everything too.
    """
    dispatcher = Dispatcher(handler, writer.write, cancel_at_close=cancel_at_close)

    async def pump() -> None:
        try:
            async for line in read_lines(read, head):
                if line is TOO_LONG:
                    await dispatcher.too_long()
                else:
                    assert isinstance(line, bytes)
                    await dispatcher.feed(line)
        except (ConnectionError, OSError) as exc:
            log.info("input failed, ending the session: %s", exc)

    waits = {asyncio.ensure_future(pump()), asyncio.ensure_future(writer.gone.wait())}
    if stop is not None:
        waits.add(asyncio.ensure_future(stop.wait()))
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for waiting in waits:
            waiting.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
        if writer.gone.is_set():
            await dispatcher.abort()
        else:
            await dispatcher.close()
    except BaseException:
        for waiting in waits:
            waiting.cancel()
        await dispatcher.abort()
        raise


__all__ = ["run_session"]
