"""Which conversations a periodic check reads: all of them, or a turn of them.

The window check (`Ingestor.reconcile`) reads each conversation's recent messages and
libxmtp's count of them: two libxmtp queries and two store reads a conversation. At
10,000 conversations that cost 5–6 s of CPU every catch-up period on an idle daemon
(docs/bench.md, "big store"). What it is there for is narrow: a message that reached
libxmtp's database by a sync without the stream handing it over, of a type the
conversation listing does not show (a sync reads only the conversations whose listed
newest message changed). A stream's gap is read back in full when it reopens, and the
start reads everything. So a store of up to `ALL` conversations has every one
checked each period, as before; a bigger one has them checked in turns, in id order,
so that each is checked at least once every `ROUNDS` periods: such a message is taken
within `ROUNDS` catch-up periods instead of one. Its count check has no time window,
so a turn that comes later than the 10-minute window still finds the gap.

The disappearing-settings refresh (cone/core/retention.py) takes its turns the same
way. A setting changes by a group update, a message ingest takes in, and taking it in
reads that conversation's setting at once; the refresh is the net for an update
ingest never took. At 10,000 conversations reading every setting each period was
about a tenth of an idle daemon's CPU (docs/bench.md, "big store").
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Final, Generic, TypeVar

#: Stores of up to this many conversations are checked whole every period.
ALL: Final = 500
#: A bigger store is checked whole over at most this many periods.
ROUNDS: Final = 8


T = TypeVar("T")


class WindowTurns(Generic[T]):
    """The conversations each period reads, turn by turn (`key`: a conversation's id)."""

    def __init__(self, key: Callable[[T], str], all_up_to: int = ALL, rounds: int = ROUNDS) -> None:
        self._key = key
        self._all_up_to = all_up_to
        self._rounds = rounds
        self._after = ""  # the last conversation id of the previous turn

    def next(self, listing: Sequence[T]) -> list[T]:
        """This period's turn: the whole `listing` when it is small, else the next
        share of it after the previous turn's last id (wrapping around), at least
        `all_up_to` and at least a `rounds`-th of it."""
        if len(listing) <= self._all_up_to:
            return list(listing)
        ordered = sorted(listing, key=self._key)
        share = max(self._all_up_to, -(-len(ordered) // self._rounds))
        start = bisect.bisect_right([self._key(c) for c in ordered], self._after)
        turn = (ordered[start:] + ordered[:start])[:share]
        self._after = self._key(turn[-1])
        return turn


__all__ = ["ALL", "ROUNDS", "WindowTurns"]
