"""stdin and stdout for the SDK's stdio transport, without a thread per line.

The SDK reads stdin and writes stdout through anyio's file wrappers, which hop to a
worker thread for every line in and every write and flush out. These adapters give it
the same calls (`async for line in stdin`, `await stdout.write(text)`, `await
stdout.flush()`) on cone's own stdio (event-loop pipes, see `cone.facades._stdio`),
with cone's framing: a line over 16 MiB is skipped (and logged), not buffered.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from cone.facades.jsonrpc import MAX_LINE_BYTES, LineWriter, read_lines
from cone.facades.jsonrpc._framing import Read

log = logging.getLogger(__name__)


class LineSource:
    """`async for line in source`: text lines from a byte reader."""

    def __init__(self, read: Read) -> None:
        self._read = read

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in read_lines(self._read):
            if isinstance(line, bytes):
                yield line.decode("utf-8", errors="replace")
            else:
                log.warning("skipped an MCP line longer than %d bytes", MAX_LINE_BYTES)


class LineSink:
    """`await sink.write(text)` and `await sink.flush()` onto a LineWriter."""

    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        await self._writer.write(text.encode())

    async def flush(self) -> None:
        return None


__all__ = ["LineSink", "LineSource"]
