"""Dispatch: JSON-RPC 2.0 envelopes, ids, concurrency, cancellation and batches.

Decisions, as documented in docs/protocol.md:

- Every request runs as its own task and is answered as soon as it is done, so answers
  may come back out of order; correlate them by `id`. A line answers at most once.
- A notification (no `id`) is executed and never answered, whatever happens. Unknown
  notifications are ignored.
- `notifications/cancelled` with `params.requestId` cancels every outstanding request
  with that id. As in MCP, a cancelled request gets no response. A `receive` that is
  cancelled leaves its messages pending; a mutating call may already have taken effect
  (retry sends with the same key and acks with the same ids).
- Batches (a JSON array) are supported as JSON-RPC 2.0 says: the elements run
  concurrently, their answers come back together in one array in element order, once
  all are done; an empty array is one -32600; a batch of notifications gets no answer.
  A batch holds at most `MAX_BATCH` elements (a longer one is one -32600, nothing of it
  runs), and each element takes its own slot of the outstanding-call bound, so a batch
  is read ahead no further than the same calls on single lines.
- One bound for a whole answer, `ANSWER_MAX_BYTES` (a request line's bound): a single
  answer over it is replaced by -32600 `answer_too_large`; a batch's answers join it
  as they finish while they fit, each encoded at once (the array is joined from those
  bytes, never built larger), and one that would pass it is replaced by that error. An
  answer of at most `SMALL_ANSWER_BYTES` (every write's: send, ack, accept...) always
  fits: room for `MAX_BATCH` of them is kept aside, so a batch never loses a write's
  answer to a large read's.
- At end of input, read-only calls still outstanding (a long `receive`) are cancelled
  and unanswered; every other call finishes and is answered before the session ends.
- Ids are strings, numbers or null. Unparseable lines get -32700 with `id: null`;
  invalid request objects -32600 (with the id when it could be read), even without
  an id: only a valid notification goes unanswered. `"params": null` counts as absent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, Final

from cone.errors import ConeError
from cone.facades.jsonrpc._errors import (
    AnswerTooLarge,
    InternalError,
    InvalidRequest,
    JsonRpcError,
    LineTooLong,
    ParseError,
    error_object,
)
from cone.facades.jsonrpc._framing import MAX_LINE_BYTES, encode

log = logging.getLogger(__name__)

CANCELLED: Final = "notifications/cancelled"
# Requests a session runs at once before it stops reading (back-pressure on the writer).
MAX_OUTSTANDING: Final = 10_000
# Elements of one batch at most; a longer batch is refused whole with -32600.
MAX_BATCH: Final = 100
# The most one answer line holds, a batch's whole array included: what a request line
# may hold, so a client that reads one reads the other.
ANSWER_MAX_BYTES: Final = MAX_LINE_BYTES
# Answers this small always fit in a batch (room for MAX_BATCH of them is kept aside).
SMALL_ANSWER_BYTES: Final = 4096

Handler = Callable[[str, Any], Awaitable[Any]]
Write = Callable[[bytes], Awaitable[None]]
_ABSENT: Final = object()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _id_key(value: Any) -> tuple[str, Any]:
    """Ids 1 and "1" differ; 1 and 1.0 do not."""
    return ("s", value) if isinstance(value, str) else ("n", value)


def _valid_id(value: Any) -> bool:
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _response(id_: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def _error(id_: Any, exc: JsonRpcError | ConeError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": error_object(exc)}


class _Budget:
    """The bytes a batch's answers may still take, large ones first come first served."""

    def __init__(self) -> None:
        # Brackets, commas and the newline, and the room kept for small answers.
        self.left = ANSWER_MAX_BYTES - MAX_BATCH * (SMALL_ANSWER_BYTES + 1) - 3

    def take(self, size: int) -> bool:
        if size <= SMALL_ANSWER_BYTES:
            return True
        if size > self.left:
            return False
        self.left -= size
        return True


def _too_large(id_: Any, size: int, *, batch: bool) -> bytes:
    where = "this batch's answer" if batch else "an answer"
    hint = "ask again in a smaller batch" if batch else "ask for fewer items (`limit`)"
    return encode(
        _error(
            id_,
            AnswerTooLarge(
                f"the answer ({size} bytes) would pass {where}'s bound of "
                f"{ANSWER_MAX_BYTES} bytes: the call ran, its result was dropped; {hint}"
            ),
        )
    )


class _Call:
    """A valid request or notification, ready to run."""

    __slots__ = ("id", "method", "notification", "params")

    def __init__(self, id_: Any, method: str, params: Any, notification: bool) -> None:
        self.id = id_
        self.method = method
        self.params = params
        self.notification = notification


class Dispatcher:
    """Turns lines into handler calls and answers; one per session."""

    def __init__(
        self,
        handler: Handler,
        write: Write,
        *,
        cancel_at_close: Callable[[str], bool] = lambda method: False,
        max_outstanding: int = MAX_OUTSTANDING,
    ) -> None:
        self._handler = handler
        self._write = write
        self._cancel_at_close = cancel_at_close
        self._slots = asyncio.Semaphore(max_outstanding)
        self._tasks: dict[asyncio.Task[Any], _Call | None] = {}
        self._by_id: dict[tuple[str, Any], set[asyncio.Task[Any]]] = {}

    @property
    def outstanding(self) -> int:
        """Tasks running (requests, notifications and batches)."""
        return len(self._tasks)

    # ---- input ----------------------------------------------------------------------

    async def too_long(self) -> None:
        """Answer a line that was over the limit."""
        await self._send(
            _error(None, LineTooLong(f"line is longer than {MAX_LINE_BYTES} bytes: skipped"))
        )

    async def feed(self, line: bytes) -> None:
        """Handle one line: answer it now, or start the work that will."""
        try:
            message = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError:
            await self._send(_error(None, ParseError("line is not valid UTF-8")))
            return
        except RecursionError:
            await self._send(_error(None, ParseError("JSON nested too deeply")))
            return
        except ValueError as exc:
            await self._send(_error(None, ParseError(f"not JSON: {exc}")))
            return
        if isinstance(message, list):
            if not message:
                await self._send(_error(None, InvalidRequest("empty batch")))
                return
            if len(message) > MAX_BATCH:
                await self._send(
                    _error(
                        None,
                        InvalidRequest(
                            f"a batch holds at most {MAX_BATCH} requests; this one has "
                            f"{len(message)}: nothing of it ran, split it"
                        ),
                    )
                )
                return
            await self._start_batch(message)
            return
        call = self._classify(message)
        if isinstance(call, dict):
            await self._send(call)
        elif call is not None:
            await self._spawn(self._single(call), call)

    def _classify(self, message: Any) -> _Call | dict[str, Any] | None:
        """A call to run, an error response to send now, or None (nothing to do).

        Only a valid notification goes unanswered: an invalid request object is
        answered with -32600 even without an id (JSON-RPC 2.0, section 5).
        """
        if not isinstance(message, dict):
            return _error(None, InvalidRequest("a request must be a JSON object"))
        id_ = message.get("id", _ABSENT)
        notification = id_ is _ABSENT
        if not notification and not _valid_id(id_):
            return _error(None, InvalidRequest("id must be a string, a number or null"))
        reply_id = None if notification else id_
        if message.get("jsonrpc") != "2.0":
            return _error(reply_id, InvalidRequest('jsonrpc must be "2.0"'))
        method = message.get("method")
        if not isinstance(method, str):
            return _error(reply_id, InvalidRequest("method must be a string"))
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            return _error(reply_id, InvalidRequest("params must be an object or an array"))
        if method == CANCELLED:
            if notification:
                self._cancel(params)
                return None
            return _error(reply_id, InvalidRequest(f"{CANCELLED} is a notification: send no id"))
        return _Call(reply_id, method, params, notification)

    def _cancel(self, params: Any) -> None:
        if not isinstance(params, dict) or "requestId" not in params:
            return
        request_id = params["requestId"]
        if not _valid_id(request_id):
            return
        for task in self._by_id.get(_id_key(request_id), set()):
            task.cancel()

    # ---- running ---------------------------------------------------------------------

    async def _spawn(self, work: Awaitable[Any], call: _Call | None) -> None:
        await self._slots.acquire()
        task: asyncio.Task[Any] = asyncio.ensure_future(work)
        self._track(task, call)
        task.add_done_callback(lambda _t: self._slots.release())

    def _track(self, task: asyncio.Task[Any], call: _Call | None) -> None:
        self._tasks[task] = call
        key = None if call is None or call.notification else _id_key(call.id)
        if key is not None:
            self._by_id.setdefault(key, set()).add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.pop(t, None)
            if key is not None:
                tasks = self._by_id.get(key)
                if tasks is not None:
                    tasks.discard(t)
                    if not tasks:
                        del self._by_id[key]

        task.add_done_callback(done)

    async def _answer(self, call: _Call, budget: _Budget | None = None) -> bytes | None:
        """Run one call; its response encoded (within the answer's bound, or a batch's
        `budget`), or None for a notification."""
        failure: JsonRpcError | ConeError | None = None
        try:
            result = await self._handler(call.method, call.params)
            # Encoded here, not at the writer: a result that is not JSON fails now, and
            # the result's objects are freed before the answer waits for its batch.
            line = encode(_response(call.id, result))
            del result
        except (JsonRpcError, ConeError) as exc:
            failure = exc
        except Exception as exc:  # the facade's one boundary for unexpected failures
            log.exception("internal error in %s", call.method)
            failure = InternalError(f"internal error in {call.method}: {exc}")
        if call.notification:
            if failure is not None:
                log.info("notification %s failed: %s", call.method, failure.message)
            return None
        if failure is not None:
            line = encode(_error(call.id, failure))
        if budget is None:
            if len(line) > ANSWER_MAX_BYTES:
                return _too_large(call.id, len(line), batch=False)
        elif not budget.take(len(line)):
            return _too_large(call.id, len(line), batch=True)
        return line

    async def _single(self, call: _Call) -> None:
        line = await self._answer(call)
        if line is not None:
            await self._write(line)

    async def _start_batch(self, elements: list[Any]) -> None:
        """Start every valid element (each on its own slot, as a single line would be),
        then a task that answers them together."""
        entries: list[bytes | asyncio.Task[bytes | None] | None] = []
        budget = _Budget()
        for element in elements:
            call = self._classify(element)
            if isinstance(call, _Call):
                await self._slots.acquire()
                child = asyncio.ensure_future(self._answer(call, budget))
                self._track(child, call)
                child.add_done_callback(lambda _t: self._slots.release())
                entries.append(child)
            else:
                entries.append(None if call is None else encode(call))
        collector: asyncio.Task[None] = asyncio.ensure_future(self._collect(entries))
        self._track(collector, None)

    async def _collect(self, entries: list[bytes | asyncio.Task[bytes | None] | None]) -> None:
        children = [e for e in entries if isinstance(e, asyncio.Task)]
        try:
            await asyncio.gather(*children, return_exceptions=True)
        except asyncio.CancelledError:
            for child in children:
                child.cancel()
            raise
        out: list[bytes] = []
        for entry in entries:
            if isinstance(entry, asyncio.Task):
                if entry.cancelled() or entry.exception() is not None:
                    continue
                entry = entry.result()
            if entry is not None:
                out.append(entry.removesuffix(b"\n"))
        if out:
            await self._write(b"[" + b",".join(out) + b"]\n")

    async def _send(self, message: Any) -> None:
        try:
            line = encode(message)
        except (ValueError, TypeError) as exc:  # unreachable for checked results
            log.error("could not encode a response: %s", exc)
            line = encode(_error(None, InternalError("could not encode the response")))
        await self._write(line)

    # ---- ending ----------------------------------------------------------------------

    async def close(self) -> None:
        """Input ended: cancel read-only calls, let the others finish and answer."""
        for task, call in list(self._tasks.items()):
            if call is not None and self._cancel_at_close(call.method):
                task.cancel()
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def abort(self) -> None:
        """Cancel everything outstanding and wait for it to stop."""
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


__all__ = [
    "ANSWER_MAX_BYTES",
    "CANCELLED",
    "MAX_BATCH",
    "MAX_OUTSTANDING",
    "Dispatcher",
    "Handler",
    "Write",
]
