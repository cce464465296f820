"""stdin and stdout for a facade that speaks a line protocol on them.

`guard_stdout()` runs first: it keeps the real stdout for the protocol and points
file descriptor 1 at stderr, so that nothing else (a library's print, a native
log line) can ever write to the protocol stream. `open_stdio()` then gives a reader
on stdin and a writer on the kept stdout: event-loop transports for pipes and
sockets; plain blocking calls for regular files (which never wait long); and for
anything else (a terminal) a reader thread and blocking writes. uvloop aborts on
pipe transports over regular files, so the kind of each fd is checked first.
"""

from __future__ import annotations

import asyncio
import os
import queue
import stat
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from cone.facades.jsonrpc._framing import LineWriter, Read


def guard_stdout() -> int:
    """Keep stdout for the protocol (returned as a new fd); fd 1 becomes stderr."""
    sys.stdout.flush()
    # sys.stdout, not fd 1: once cone/_logs.py captures the native fds, the real
    # stdout lives elsewhere.
    out_fd = os.dup(sys.stdout.fileno())
    os.dup2(2, 1)
    return out_fd


class _FileStream:
    """Blocking writes (a file or terminal), with the StreamWriter calls LineWriter uses."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    async def drain(self) -> None:
        return None


def _is_stream(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _is_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


class _ThreadReader:
    """Reads a blocking fd (a terminal) on a daemon thread, one read per call."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self.fd = fd
        self.loop = loop
        self._asks: queue.SimpleQueue[tuple[int, asyncio.Future[bytes]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="cone-stdin", daemon=True).start()

    def _run(self) -> None:
        while True:
            n, future = self._asks.get()
            try:
                data = os.read(self.fd, n)
            except OSError:
                data = b""
            self.loop.call_soon_threadsafe(_settle, future, data)
            if not data:
                return

    async def read(self, n: int) -> bytes:
        future: asyncio.Future[bytes] = self.loop.create_future()
        self._asks.put((n, future))
        return await future


def _settle(future: asyncio.Future[bytes], data: bytes) -> None:
    if not future.done():
        future.set_result(data)


def until_set(read: Read, event: asyncio.Event) -> Read:
    """`read`, ending the input (b"") once `event` is set, as a closed stdin would."""

    async def reading(n: int) -> bytes:
        if event.is_set():
            return b""
        data = asyncio.ensure_future(read(n))
        ended = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({data, ended}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            data.cancel()
            raise
        finally:
            ended.cancel()
        if data.done():
            return data.result()
        data.cancel()  # unread input stays unread
        return b""

    return reading


@asynccontextmanager
async def open_stdio(out_fd: int, in_fd: int = 0) -> AsyncIterator[tuple[Read, LineWriter]]:
    """A reader on `in_fd` and a line writer on `out_fd`, for the block."""
    loop = asyncio.get_running_loop()
    in_blocking, out_blocking = os.get_blocking(in_fd), os.get_blocking(out_fd)
    in_transport: asyncio.BaseTransport | None = None
    out_writer: asyncio.StreamWriter | None = None
    read: Read
    try:
        if _is_stream(in_fd):
            reader = asyncio.StreamReader()
            in_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader),
                os.fdopen(in_fd, "rb", buffering=0, closefd=False),
            )
            read = reader.read
        elif _is_file(in_fd):

            async def read(n: int) -> bytes:
                return os.read(in_fd, n)

        else:
            read = _ThreadReader(in_fd, loop).read
        if _is_stream(out_fd):
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin,
                os.fdopen(out_fd, "wb", buffering=0, closefd=False),
            )
            out_writer = asyncio.StreamWriter(transport, protocol, None, loop)
            lines = LineWriter(out_writer)
        else:
            lines = LineWriter(_FileStream(out_fd))
        yield read, lines
    finally:
        if out_writer is not None:
            out_writer.close()
        if in_transport is not None:
            in_transport.close()
        for fd, blocking in ((in_fd, in_blocking), (out_fd, out_blocking)):
            try:
                os.set_blocking(fd, blocking)
            except OSError:
                pass


__all__ = ["guard_stdout", "open_stdio", "until_set"]
