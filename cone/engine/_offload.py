"""Every libxmtp call runs off the event loop, under a time bound.

Why: the bindings run libxmtp's work on the thread that calls them. A synchronous
method (`conversation`, `prepare_message`, `consent_state`, …) blocks its caller, and
so does polling an async one: uniffi polls the Rust future on the awaiting thread, and
libxmtp takes a database connection inside that poll, waiting up to its pool's
timeout when none can be had (a full disk: every new connection fails). On the event
loop that froze the whole daemon, reads of cone's own store included.

So the engine hands each call to `Offload.run`: a worker thread with its own event
loop makes the call (and awaits it, when it is async) under the bound; the caller's
loop only waits, and gives up at the bound with `Unavailable`. A worker stuck inside
libxmtp stays stuck, but others are started for later calls (up to `MAX_THREADS`),
and the threads are daemon threads, so a stuck call never holds up the exit.

Asynchronous calls share one such thread, the lane, whose event loop polls them all
(as a libxmtp app's own loop would): a thread per call costs every poll of every
call a thread switch and a GIL hand-off, which halved the rate of eight
conversations sending at once. The lane's loop is
uvloop's, and a call crosses with one wake-up each way: the caller's loop hands it
over with `call_soon_threadsafe`, the lane runs it as one task, and hands the outcome
straight to the caller's future (the caller's cancellation cancels it there).

The lane ticks a heartbeat; a lane that has not ticked for `STUCK_S` (a call blocked
its thread), or on which a call overran its bound, takes no new calls: they go to a
thread of their own, as synchronous calls do, until the lane ticks again. A call already queued on
the lane when it stalled waits at most its bound, like any call.

`close` ends the lane and the workers (the engine closes its offload), and every lane
still running is stopped at the interpreter's exit: a lane's heartbeat is a uvloop
timer, and a timer that fires while the interpreter finalizes takes the GIL through
`PyGILState_Ensure`, which then has no interpreter left and crashes the process.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import uvloop

from cone.errors import Unavailable

T = TypeVar("T")

#: Worker threads at most; a call finding none free waits in the queue (its bound runs).
MAX_THREADS: Final = 16
#: How much longer the caller waits than the worker's own bound before giving up.
GRACE_S: Final = 1.0
#: The lane's heartbeat, and how long without one makes it stuck (seconds).
BEAT_S: Final = 0.2
STUCK_S: Final = 1.0
#: How long the exit waits for each lane still running to stop (one stuck inside a
#: libxmtp call does not).
EXIT_WAIT_S: Final = 1.0


@dataclass
class _Job:
    call: Callable[[], Any]
    seconds: float
    future: concurrent.futures.Future[Any]


async def _complete(call: Callable[[], Any]) -> Any:
    result = call()
    if inspect.isawaitable(result):
        result = await result
    return result


class _Lane:
    """One thread whose event loop (uvloop's) runs many asynchronous calls at once."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        self.beat = time.monotonic()
        self.stalled = False  # a call on it overran its bound
        self.thread = threading.Thread(target=self._run, name="cone-xmtp-lane", daemon=True)
        self.thread.start()
        _RUNNING.add(self)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._tick)
        try:
            self.loop.run_forever()
        finally:
            # Calls still on it are abandoned: their callers have their bounds.
            self.loop.close()

    def stop(self) -> None:
        """End the lane's loop, and with it its thread (after the call it is in)."""
        _RUNNING.discard(self)
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:
            pass  # closed already

    def _tick(self) -> None:
        self.beat = time.monotonic()
        self.stalled = False
        self.loop.call_later(BEAT_S, self._tick)

    def open(self) -> bool:
        """Whether the lane takes new calls: it ticked lately and nothing on it stalled."""
        return not self.stalled and time.monotonic() - self.beat < STUCK_S


#: The lanes not yet stopped, for the exit.
_RUNNING: weakref.WeakSet[_Lane] = weakref.WeakSet()


@atexit.register
def _stop_lanes() -> None:
    lanes = list(_RUNNING)
    for lane in lanes:
        lane.stop()
    for lane in lanes:
        lane.thread.join(EXIT_WAIT_S)


async def _bounded(call: Callable[[], Any], seconds: float) -> Any:
    async with asyncio.timeout(seconds):
        return await _complete(call)


class _LaneCall:
    """One call on the lane: one task there, its outcome handed straight to the
    caller's future on the caller's loop (one wake-up each way, no other futures)."""

    __slots__ = ("call", "caller", "done", "dropped", "seconds", "task")

    def __init__(
        self, call: Callable[[], Any], seconds: float, caller: asyncio.AbstractEventLoop
    ) -> None:
        self.call = call
        self.seconds = seconds
        self.caller = caller
        self.done: asyncio.Future[Any] = caller.create_future()
        self.task: asyncio.Task[Any] | None = None
        self.dropped = False

    def start(self, lane: asyncio.AbstractEventLoop) -> None:
        """On the lane: start the call (unless its caller gave up meanwhile)."""
        if self.dropped:
            return
        self.task = lane.create_task(_bounded(self.call, self.seconds))
        self.task.add_done_callback(self._finished)

    def drop(self) -> None:
        """On the lane: the caller gave up (cancelled, or out of time): cancel the call."""
        self.dropped = True
        if self.task is not None:
            self.task.cancel()

    def _finished(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self._hand_back(self.done.cancel)
            return
        exc = task.exception()  # read here: never "never retrieved"
        if exc is None:
            self._hand_back(self.done.set_result, task.result())
        else:
            self._hand_back(self.done.set_exception, exc)

    def _hand_back(self, settle: Callable[..., object], *args: Any) -> None:
        def settled() -> None:
            if not self.done.done():  # else its caller gave up already
                settle(*args)

        try:
            self.caller.call_soon_threadsafe(settled)
        except RuntimeError:
            pass  # the caller's loop is closed: nobody waits for this call


class Offload:
    """Worker threads, each with its own event loop, that make libxmtp calls."""

    def __init__(self, max_threads: int = MAX_THREADS) -> None:
        # None tells a worker to end.
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._max = max_threads
        self._threads = 0
        self._idle = 0
        self._lock = threading.Lock()
        self._lane: _Lane | None = None
        self._closed = False

    def close(self) -> None:
        """End the lane and the workers; later calls are refused. A call still running
        is abandoned (its caller has its bound), and its thread ends after it."""
        self._closed = True
        lane, self._lane = self._lane, None
        if lane is not None:
            lane.stop()
        with self._lock:
            workers = self._threads
        for _ in range(workers):
            self._jobs.put(None)

    def _refuse_closed(self, doing: str) -> None:
        if self._closed:
            raise Unavailable(f"{doing}: the XMTP client is closed")

    async def run(self, call: Callable[[], Awaitable[T]], seconds: float, doing: str) -> T:
        """Await `call()` on the lane (or a worker of its own while the lane is
        stuck), bounded by `seconds`; Unavailable when it does not finish in time."""
        self._refuse_closed(doing)
        if self._lane is None:
            self._lane = _Lane()
        lane = self._lane
        if not lane.open():
            return await self._run(call, seconds, doing)  # type: ignore[no-any-return]  # the job's result is call()'s
        job = _LaneCall(call, seconds, asyncio.get_running_loop())
        lane.loop.call_soon_threadsafe(job.start, lane.loop)
        try:
            async with asyncio.timeout(seconds + GRACE_S):
                result: T = await job.done
        except TimeoutError:
            lane.stalled = True  # until its next tick: new calls go elsewhere meanwhile
            raise Unavailable(f"{doing} did not finish in {seconds:.0f} s") from None
        finally:
            if job.done.cancelled():  # out of time, or our caller cancelled us
                lane.loop.call_soon_threadsafe(job.drop)
        return result

    async def run_sync(self, call: Callable[[], T], seconds: float, doing: str) -> T:
        """`call()` on a worker, bounded as `run`."""
        return await self._run(call, seconds, doing)  # type: ignore[no-any-return]  # as in run

    async def _run(self, call: Callable[[], Any], seconds: float, doing: str) -> Any:
        self._refuse_closed(doing)
        job = _Job(call, seconds, concurrent.futures.Future())
        self._submit(job)
        try:
            async with asyncio.timeout(seconds + GRACE_S):
                return await asyncio.wrap_future(job.future)
        except TimeoutError:
            raise Unavailable(f"{doing} did not finish in {seconds:.0f} s") from None

    def _submit(self, job: _Job) -> None:
        with self._lock:
            start = self._idle == 0 and self._threads < self._max
            if start:
                self._threads += 1
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._work, name="cone-xmtp", daemon=True).start()

    def _work(self) -> None:
        loop = asyncio.new_event_loop()
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
                if job is None:
                    self._threads -= 1
            if job is None:
                loop.close()
                return
            # A job whose caller gave up while it queued is not started at all.
            if not job.future.set_running_or_notify_cancel():
                continue
            try:
                result = loop.run_until_complete(_bounded(job.call, job.seconds))
            except BaseException as exc:  # the thread's boundary: the caller gets the error
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
