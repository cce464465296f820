"""stdin and stdout for the SDK's stdio transport, without a thread per line.

The SDK reads stdin and writes stdout through anyio's file wrappers, which hop to a
worker thread for every line in and every write and flush out. These adapters give it
the same calls (`async for line in stdin`, `await stdout.write(text)`, `await
stdout.flush()`) on cone's own stdio (event-loop pipes, see `cone.facades._stdio`),
with cone's framing: a line over 16 MiB is skipped (and logged), not buffered.

Every line that carries an id gets an answer. The SDK drops a line it cannot read
(not JSON, not a JSON-RPC message, a batch), so those are answered here before the
SDK sees them: not JSON is -32700 with `id: null`; a message whose shape is wrong is
-32600 with its id when it has a readable one; a batch (which MCP 2025-03-26 allowed
and later versions removed) is an array of -32600 answers, one per element with an
id, saying to send one request per line. A line too long to read is -32600 with
`id: null`. Notifications with a wrong shape get nothing, as JSON-RPC says.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from mcp import types
from pydantic import ValidationError

from cone.facades.jsonrpc import MAX_LINE_BYTES, LineWriter, read_lines
from cone.facades.jsonrpc._framing import Read

log = logging.getLogger(__name__)


class LineSource:
    """`async for line in source`: text lines from a byte reader, each one the SDK can
    read; the others are answered on `writer` here."""

    def __init__(self, read: Read, writer: LineWriter) -> None:
        self._read = read
        self._writer = writer

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in read_lines(self._read):
            if not isinstance(line, bytes):
                log.warning("skipped an MCP line longer than %d bytes", MAX_LINE_BYTES)
                await self._answer(_error(None, -32600, f"line longer than {MAX_LINE_BYTES} bytes"))
                continue
            text = line.decode("utf-8", errors="replace")
            answer = _refusal(text)
            if answer is None:
                yield text
            elif answer:
                await self._answer(answer)

    async def _answer(self, answer: Any) -> None:
        await self._writer.write(json.dumps(answer, separators=(",", ":")).encode() + b"\n")


def _error(id_: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _readable_id(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    id_ = value.get("id")
    return id_ if isinstance(id_, str | int) and not isinstance(id_, bool) else None


def _refusal(text: str) -> Any:
    """None when the SDK can take the line; else the answer to write ([] or {} for none)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return _error(None, -32700, "parse error: the line is not JSON")
    if isinstance(value, list):
        if not value:
            return _error(None, -32600, "an empty batch is not a request")
        message = "batches are not supported: send each request on its own line"
        return [
            _error(_readable_id(v), -32600, message) for v in value if _readable_id(v) is not None
        ]
    try:
        types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as exc:
        if isinstance(value, dict) and "method" in value and "id" not in value:
            return {}  # a notification: never answered
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the message"
        return _error(_readable_id(value), -32600, f"invalid request: {where}: {first['msg']}")
    return None


class LineSink:
    """`await sink.write(text)` and `await sink.flush()` onto a LineWriter."""

    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        await self._writer.write(text.encode())

    async def flush(self) -> None:
        return None


__all__ = ["LineSink", "LineSource"]
