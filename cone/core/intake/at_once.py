"""A few items' work at once: what the full reconciliation uses to overlap one
conversation's libxmtp read with another's store work (each alone leaves the other
thread idle)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def each(items: Iterable[T], work: Callable[[T], Awaitable[None]], at_once: int) -> None:
    """`work` for every item, each taken once, in the items' order, by at most
    `at_once` workers. The first failure stops the others (cancelled, and waited
    for) and is raised: nothing runs on behind a caller that has seen it."""
    queue = iter(items)  # shared: each item is taken by one worker

    async def worker() -> None:
        for item in queue:
            await work(item)

    tasks = [asyncio.ensure_future(worker()) for _ in range(max(1, at_once))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


__all__ = ["each"]
