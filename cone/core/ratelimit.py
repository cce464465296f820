"""XMTP's write budget, kept on our side: about 3,000 writes per 5 minutes per client.

Publications take a slot from a sliding window. When the window is full, a send
waits in the outbox instead of hitting the node's limit, and the caller learns
when a slot frees (`retryAfterMs`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

WRITES_PER_WINDOW = 3000
WINDOW_S = 300.0


class WriteBudget:
    """A sliding-window counter of publications."""

    def __init__(
        self,
        limit: int = WRITES_PER_WINDOW,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit = limit
        self._window_s = window_s
        self._clock = clock
        self._times: deque[float] = deque()

    def _expire(self, now: float) -> None:
        while self._times and self._times[0] <= now - self._window_s:
            self._times.popleft()

    def take(self) -> float:
        """Take a slot and return 0, or take nothing and return seconds until one frees."""
        now = self._clock()
        self._expire(now)
        if len(self._times) >= self._limit:
            return self._times[0] + self._window_s - now
        self._times.append(now)
        return 0.0
