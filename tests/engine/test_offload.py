"""The offload keeps libxmtp's blocking off the event loop and bounds every call."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading

import pytest

from cone.engine._offload import Offload
from cone.errors import Unavailable
from support.waiting import until


async def test_a_call_that_blocks_its_thread_leaves_the_loop_free_and_is_bounded(
    offload: Offload,
) -> None:
    release = threading.Event()
    loop_thread = threading.get_ident()
    ran_on: list[int] = []

    def stuck() -> None:
        ran_on.append(threading.get_ident())
        release.wait(30)

    call = asyncio.ensure_future(offload.run_sync(stuck, 0.5, "a stuck call"))

    async def blocked() -> bool:
        return bool(ran_on)  # in `stuck`, which holds its worker until the release below

    # The loop runs (this wait is on it) while the call blocks its worker.
    await until(blocked, timeout=10)
    # The bound ends the call: it is not left waiting for its release.
    with pytest.raises(Unavailable, match="a stuck call did not finish"):
        await call
    assert ran_on and ran_on[0] != loop_thread
    # Another call gets another worker while the first is still stuck.
    assert await offload.run_sync(lambda: 42, 10, "a quick call") == 42
    release.set()


async def test_async_calls_are_awaited_on_the_worker_and_errors_come_back(offload: Offload) -> None:

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


async def test_async_calls_share_one_lane_until_a_call_blocks_it_then_go_around_it(
    offload: Offload,
) -> None:

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
    # The lane is stuck (until the release below): a new call runs on a thread of
    # its own, else it would wait there past its bound.
    assert await offload.run(thread_name, 10, "a call around it") == "cone-xmtp"
    release.set()

    async def back_on_the_lane() -> bool:
        return await offload.run(thread_name, 1, "a call") == "cone-xmtp-lane"

    await until(back_on_the_lane, timeout=10)


async def test_a_caller_that_gives_up_cancels_its_call_on_the_lane(offload: Offload) -> None:
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


async def test_a_closed_offload_ends_its_threads_and_refuses_calls(offload: Offload) -> None:
    async def name() -> str:
        return threading.current_thread().name

    before = set(threading.enumerate())  # other tests' threads, if any, are not ours
    assert await offload.run(name, 1, "a call") == "cone-xmtp-lane"
    assert await offload.run_sync(lambda: 1, 1, "a call") == 1
    mine = set(threading.enumerate()) - before
    assert {t.name for t in mine} == {"cone-xmtp-lane", "cone-xmtp"}
    offload.close()

    async def ended() -> bool:
        return not any(t.is_alive() for t in mine)

    await until(ended, timeout=10)
    with pytest.raises(Unavailable, match="a late call: the XMTP client is closed"):
        await offload.run(name, 1, "a late call")
    with pytest.raises(Unavailable, match="a late call: the XMTP client is closed"):
        await offload.run_sync(lambda: 1, 1, "a late call")


# A lane left running (nobody closed its offload) is stopped at the exit, before the
# interpreter finalizes: its heartbeat, a uvloop timer, would otherwise take the GIL
# from a finalized interpreter, and crash the process. atexit runs its handlers last
# registered first: the check, registered before cone's module, runs after its handler.
_EXIT = textwrap.dedent(
    """
    import asyncio, atexit, threading

    @atexit.register
    def check() -> None:
        alive = [t.name for t in threading.enumerate() if t.name == "cone-xmtp-lane"]
        print("lanes at the end:", len(alive), flush=True)

    from cone.engine._offload import Offload

    async def main() -> None:
        async def call() -> int:
            return 1

        await Offload().run(call, 1, "a call")  # never closed
        print("lanes running:", sum(t.name == "cone-xmtp-lane" for t in threading.enumerate()))

    asyncio.run(main())
    """
)


def test_a_lane_still_running_at_the_exit_is_stopped_before_the_interpreter_ends() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _EXIT], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "lanes running: 1\nlanes at the end: 0\n"), (
        done.stderr
    )
