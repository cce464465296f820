"""A background worker woken in the same turn of the loop as its stop still stops.

Python 3.11's `asyncio.wait_for` returns the awaited result when a cancellation
comes with it, losing the cancellation: a worker that waited on `wait_for(event.wait(),
t)` then went on looping, and whatever stopped it waited forever (seen under load as a
core's stop hanging for 300 s). The bad timing is forced here: each worker is woken
and stopped with no await between, while it waits with a bound (a wait without one,
as an idle outbox's or attachment fetcher's, never lost it). `asyncio.wait_for` is
now refused in cone/ by the linter (pyproject.toml)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from cone.core.intake.followups import FollowUps
from cone.core.service import Core
from support.waiting import parked, until, until_parked

STOP_S = 5.0
_WORKER = FollowUps._worker.__code__


def _named(name: str) -> asyncio.Task[object]:
    (task,) = [t for t in asyncio.all_tasks() if t.get_name() == name]
    return task


async def _idle(core: Core) -> None:
    """Start the core; each test then waits until its worker idles until woken."""
    await core.start()
    await core.started()


async def _stops(wake: Callable[[], None], stop: Callable[[], Awaitable[None]]) -> None:
    wake()
    async with asyncio.timeout(STOP_S):
        await stop()


async def test_the_catch_up_woken_as_it_stops_stops(core: Core) -> None:
    await _idle(core)
    await until_parked(_named("catch-up"))  # waiting for its next period
    await _stops(core.intake.catch_up.now, core.intake.catch_up.stop)
    await core.stop()


async def test_the_expiry_worker_woken_as_it_stops_stops(core: Core) -> None:
    await _idle(core)
    await until_parked(_named("expiry"))  # waiting for its next expiry
    await _stops(core.retention._wake.set, core.retention.stop)  # its wake-up, as a hook sets it
    await core.stop()


async def test_the_follow_ups_woken_as_they_stop_stop(core: Core) -> None:
    await _idle(core)
    follow_ups = core.intake._follow_ups
    follow_ups.add("00" * 16)  # a first sync due in a second: the workers wait for it

    async def workers_waiting() -> bool:
        workers = [
            t for t in asyncio.all_tasks() if getattr(t.get_coro(), "cr_code", None) is _WORKER
        ]
        return bool(workers) and all(parked(t) for t in workers)

    await until(workers_waiting)
    await _stops(lambda: follow_ups.add("11" * 16), follow_ups.stop)
    await core.stop()
