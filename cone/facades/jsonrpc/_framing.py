"""Framing: newline-delimited JSON-RPC over a byte stream, in both directions.

Input is split on `\\n` (a `\\r` before it is JSON whitespace and harmless). A line
longer than `MAX_LINE_BYTES` is not buffered: it is reported once as `TOO_LONG` and
skipped to its end, so memory stays bounded and the stream stays usable. A last line
without a newline at end of input is still a line.

Output is one compact JSON text per line, ASCII only (`\\u` escapes), so that no
string, not even a lone surrogate echoed from an `id`, can break the framing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, Protocol

# The longest line accepted, newline excluded. A receive batch or a send with the
# largest text (512 KiB) fits many times over.
MAX_LINE_BYTES: Final = 16 * 1024 * 1024
CHUNK_BYTES: Final = 256 * 1024


class _TooLong:
    def __repr__(self) -> str:
        return "TOO_LONG"


TOO_LONG: Final = _TooLong()

Read = Callable[[int], Awaitable[bytes]]


async def read_lines(
    read: Read, head: bytes = b"", max_line: int = MAX_LINE_BYTES
) -> AsyncIterator[bytes | _TooLong]:
    """Lines from `read(n)` (b"" at end of input), after `head`; TOO_LONG for a long one."""
    buf = bytearray(head)
    start = 0  # first unconsumed byte
    scan = 0  # where to look for the next newline
    skipping = False  # inside a line already reported as too long
    while True:
        nl = buf.find(b"\n", max(start, scan))
        if nl >= 0:
            line = bytes(buf[start:nl])
            start = scan = nl + 1
            if skipping:
                skipping = False
            elif len(line) > max_line:
                yield TOO_LONG
            else:
                yield line
            continue
        if skipping or len(buf) - start > max_line:
            if not skipping:
                skipping = True
                yield TOO_LONG
            buf.clear()
        else:
            del buf[:start]
        start = 0
        scan = len(buf)
        chunk = await read(CHUNK_BYTES)
        if not chunk:
            if buf and not skipping:
                yield bytes(buf)
            return
        buf += chunk


def encode(message: Any) -> bytes:
    """One JSON-RPC message as a line (raises ValueError/TypeError if not JSON)."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


class Stream(Protocol):
    """Where lines go: an asyncio.StreamWriter, or anything with the same two calls."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class LineWriter:
    """Writes lines to a stream, one at a time; notices when the other end is gone."""

    def __init__(self, writer: Stream) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()
        self.gone = asyncio.Event()

    async def write(self, line: bytes) -> None:
        """Write one encoded line and wait for the buffer to drain."""
        async with self._lock:
            if self.gone.is_set():
                return
            try:
                self._writer.write(line)
                await self._writer.drain()
            except (ConnectionError, OSError, RuntimeError):
                # RuntimeError: the transport was closed under us (peer gone).
                self.gone.set()


__all__ = [
    "CHUNK_BYTES",
    "MAX_LINE_BYTES",
    "TOO_LONG",
    "LineWriter",
    "Read",
    "encode",
    "read_lines",
]
