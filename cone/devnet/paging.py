"""Cursor paging exactly as the reference node (xmtp-node-go) does it.

libxmtp's paging loop stops at the first page shorter than 100 or whose response
cursor is 0, so two rules matter: never cap a page below 100, and set the response
cursor to the last id whenever the page is full.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

MAX_PAGE_SIZE: Final = 100

# The wire values of xmtp.mls.api.v1.SortDirection.
DIRECTION_UNSPECIFIED: Final = 0
DIRECTION_ASCENDING: Final = 1
DIRECTION_DESCENDING: Final = 2


@dataclass(frozen=True, slots=True)
class Page:
    """A resolved page request: order, size and the id to continue after (0: none)."""

    ascending: bool
    limit: int
    cursor: int

    @property
    def direction(self) -> int:
        """The wire SortDirection this page is served in."""
        return DIRECTION_ASCENDING if self.ascending else DIRECTION_DESCENDING

    def next_cursor(self, ids: Sequence[int]) -> int:
        """The response cursor: the last id of a full page, else 0 (no more)."""
        return ids[-1] if ids and len(ids) >= self.limit else 0


def resolve(direction: int, limit: int, cursor: int, *, default_ascending: bool = False) -> Page:
    """Resolve request paging: unspecified direction means descending unless told
    otherwise; a limit of 0 or above 100 means 100."""
    if direction == DIRECTION_ASCENDING:
        ascending = True
    elif direction == DIRECTION_DESCENDING:
        ascending = False
    else:
        ascending = default_ascending
    size = MAX_PAGE_SIZE if limit <= 0 or limit > MAX_PAGE_SIZE else limit
    return Page(ascending=ascending, limit=size, cursor=max(cursor, 0))
