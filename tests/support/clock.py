"""A clock a test moves by hand, for logic whose input is time (`time()` and
`call_later`, as an event loop has them): no sleep, no wall clock."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(order=True)
class _Call:
    when: float
    order: int
    callback: Callable[[], object] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Time stands still until `advance`, which runs each callback falling due on
    the way, at its own time and in order."""

    def __init__(self) -> None:
        self.now = 0.0
        self._due: list[_Call] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], object], /) -> _Call:
        call = _Call(self.now + max(0.0, delay), next(self._order), callback)
        heapq.heappush(self._due, call)
        return call

    def advance(self, seconds: float = 0.0) -> None:
        """Move the time on by `seconds`, running what falls due meanwhile."""
        target = self.now + seconds
        while self._due and self._due[0].when <= target:
            call = heapq.heappop(self._due)
            self.now = call.when
            if not call.cancelled:
                call.callback()
        self.now = target
