"""How long the catch-up waits before its next pass.

The catch-up runs every `interval` (30 s by default) as a net under the streams. In a
big store one pass is long: libxmtp's sync of every conversation lists them all
itself, 10–17 s at 1,000,000 messages while libxmtp's view read every stored message
for it (docs/bench.md, "big store"; under 1 s since cone's text of that view,
cone/engine/_listing_view.py), so at a fixed 30 s an idle daemon spent a third of a
core on it. When `STRETCH` times a pass is longer than the interval, the next wait is
`STRETCH` times the pass: the catch-up then takes at most a fifth of the daemon's
time, and a store whose passes are short keeps the interval as it is. A pass shorter
than `FLOOR_S` never stretches it (a short interval configured on purpose, as tests
do, stays), and no wait exceeds `MAX_INTERVALS` intervals. What wakes the catch-up
at once (the network back, a stream reopened, the cutover) still does.
"""

from __future__ import annotations

from typing import Final

#: The wait after a long pass, in times the pass.
STRETCH: Final = 4.0
#: A pass shorter than this never stretches the wait.
FLOOR_S: Final = 1.0
#: The longest wait, in intervals (4 minutes at the default 30 s).
MAX_INTERVALS: Final = 8


def next_wait(interval_s: float, pass_s: float) -> float:
    """Seconds to wait before the next pass, after one that took `pass_s`."""
    if pass_s < FLOOR_S:
        return interval_s
    return max(interval_s, min(STRETCH * pass_s, MAX_INTERVALS * interval_s))
