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

from cone.core.service import Core

STOP_S = 5.0


async def _idle(core: Core) -> None:
    await core.start()
    await core.started()
    await asyncio.sleep(0.3)  # every worker is waiting for its next wake-up


async def _stops(wake: Callable[[], None], stop: Callable[[], Awaitable[None]]) -> None:
    wake()
    async with asyncio.timeout(STOP_S):
        await stop()


async def test_the_catch_up_woken_as_it_stops_stops(core: Core) -> None:
    await _idle(core)
    await _stops(core.intake.catch_up.now, core.intake.catch_up.stop)
    await core.stop()


async def test_the_expiry_worker_woken_as_it_stops_stops(core: Core) -> None:
    await _idle(core)
    await _stops(core.retention._wake.set, core.retention.stop)  # its wake-up, as a hook sets it
    await core.stop()


async def test_the_follow_ups_woken_as_they_stop_stop(core: Core) -> None:
    await _idle(core)
    follow_ups = core.intake._follow_ups
    follow_ups.add("00" * 16)  # a first sync due in a second: the worker waits for it
    await asyncio.sleep(0.05)
    await _stops(lambda: follow_ups.add("11" * 16), follow_ups.stop)
    await core.stop()
