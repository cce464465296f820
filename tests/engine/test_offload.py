"""The offload keeps libxmtp's blocking off the event loop and bounds every call."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from cone.engine._offload import Offload
from cone.errors import Unavailable
from support.waiting import until


async def test_a_call_that_blocks_its_thread_leaves_the_loop_free_and_is_bounded() -> None:
    offload = Offload()
    release = threading.Event()
    loop_thread = threading.get_ident()
    ran_on: list[int] = []

    def stuck() -> None:
        ran_on.append(threading.get_ident())
        release.wait(30)

    started = time.monotonic()
    call = asyncio.ensure_future(offload.run_sync(stuck, 0.5, "a stuck call"))
    # The loop keeps running while the call blocks its worker.
    ticks = 0
    while not call.done():
        await asyncio.sleep(0.01)
        ticks += 1
    with pytest.raises(Unavailable, match="a stuck call did not finish"):
        call.result()
    assert ticks > 10
    assert time.monotonic() - started < 5
    assert ran_on and ran_on[0] != loop_thread
    # Another call gets another worker while the first is still stuck.
    assert await offload.run_sync(lambda: 42, 1, "a quick call") == 42
    release.set()


async def test_async_calls_are_awaited_on_the_worker_and_errors_come_back() -> None:
    offload = Offload()

    async def on_worker() -> int:
        await asyncio.sleep(0)
        return threading.get_ident()

    assert await offload.run(on_worker, 1, "an async call") != threading.get_ident()

    async def fails() -> None:
        raise ValueError("from libxmtp")

    with pytest.raises(ValueError, match="from libxmtp"):
        await offload.run(fails, 1, "a failing call")

    async def hangs() -> None:
        await asyncio.Event().wait()

    with pytest.raises(Unavailable):
        await offload.run(hangs, 0.2, "a hanging call")


async def test_async_calls_share_one_lane_until_a_call_blocks_it_then_go_around_it() -> None:
    offload = Offload()

    async def thread_name() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert {await offload.run(thread_name, 1, "a call") for _ in range(3)} == {"cone-xmtp-lane"}
    release = threading.Event()

    async def blocks() -> None:
        release.wait(30)  # a synchronous wait inside an async call: the lane's loop stops

    stuck = asyncio.ensure_future(offload.run(blocks, 0.3, "a blocking call"))
    with pytest.raises(Unavailable, match="a blocking call did not finish"):
        await stuck
    # The lane is stuck: a new call runs on a thread of its own, within its bound.
    started = time.monotonic()
    assert await offload.run(thread_name, 1, "a call around it") == "cone-xmtp"
    assert time.monotonic() - started < 1
    release.set()

    async def back_on_the_lane() -> bool:
        return await offload.run(thread_name, 1, "a call") == "cone-xmtp-lane"

    await until(back_on_the_lane, timeout=10)


async def test_a_caller_that_gives_up_cancels_its_call_on_the_lane() -> None:
    offload = Offload()
    started = threading.Event()
    cancelled = threading.Event()

    async def waits() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def is_set(event: threading.Event) -> bool:
        return event.is_set()

    call = asyncio.ensure_future(offload.run(waits, 30, "a long call"))
    await until(lambda: is_set(started), timeout=10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await until(lambda: is_set(cancelled), timeout=10)
    # The lane stays open for the next call.

    async def answer() -> str:
        return threading.current_thread().name

    assert await offload.run(answer, 1, "a call") == "cone-xmtp-lane"
