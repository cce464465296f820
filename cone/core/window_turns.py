"""Which conversations a catch-up's window check reads: all of them, or a turn of them.

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
"""

from __future__ import annotations

import bisect
from typing import Final

from cone.engine.port import ConversationInfo

#: Stores of up to this many conversations are checked whole every period.
ALL: Final = 500
#: A bigger store is checked whole over at most this many periods.
ROUNDS: Final = 8


class WindowTurns:
    """The conversations each catch-up's window check reads, turn by turn."""

    def __init__(self, all_up_to: int = ALL, rounds: int = ROUNDS) -> None:
        self._all_up_to = all_up_to
        self._rounds = rounds
        self._after = ""  # the last conversation id of the previous turn

    def next(self, listing: list[ConversationInfo]) -> list[ConversationInfo]:
        """This period's turn: the whole `listing` when it is small, else the next
        share of it after the previous turn's last id (wrapping around), at least
        `all_up_to` and at least a `rounds`-th of it."""
        if len(listing) <= self._all_up_to:
            return listing
        ordered = sorted(listing, key=lambda c: c.id)
        share = max(self._all_up_to, -(-len(ordered) // self._rounds))
        start = bisect.bisect_right([c.id for c in ordered], self._after)
        turn = (ordered[start:] + ordered[:start])[:share]
        self._after = turn[-1].id
        return turn


__all__ = ["ALL", "ROUNDS", "WindowTurns"]
