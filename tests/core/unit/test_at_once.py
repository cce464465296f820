"""`at_once.each`: every item once, by at most so many workers, and a failure that
stops the others before it reaches the caller."""

from __future__ import annotations

import asyncio

import pytest

from cone.core.intake import at_once


async def test_each_item_is_worked_once_by_at_most_so_many_workers() -> None:
    running = most = 0
    done: list[int] = []

    async def work(item: int) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001 * (item % 3))  # the input: items of uneven length
        done.append(item)
        running -= 1

    await at_once.each(range(20), work, 2)
    assert sorted(done) == list(range(20))
    assert most == 2


async def test_a_failure_stops_the_other_workers_before_the_caller_sees_it() -> None:
    started: list[int] = []
    cancelled: list[int] = []

    async def work(item: int) -> None:
        started.append(item)
        if item == 1:
            raise ValueError("item 1")
        try:
            await asyncio.sleep(10)  # the input: work the first failure must cut short
        except asyncio.CancelledError:
            cancelled.append(item)
            raise

    with pytest.raises(ValueError, match="item 1"):
        await at_once.each(range(10), work, 2)
    assert started == [0, 1]  # nothing taken after the failure
    assert cancelled == [0]  # and the other worker's item stopped, not left running
