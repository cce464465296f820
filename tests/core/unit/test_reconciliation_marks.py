"""Where the start's full reconciliation reads a conversation from (`read_from`)."""

from __future__ import annotations

from cone.core.intake.reconciliation import WHOLE_AGAIN_NS, read_from
from cone.store.reconciled import Mark

NOW = 1_800_000_000 * 1_000_000_000
HOUR = 3600 * 1_000_000_000


def test_a_conversation_never_compared_is_read_whole() -> None:
    assert read_from(None, NOW) == 0


def test_a_conversation_compared_before_is_read_from_its_mark() -> None:
    mark = Mark(through_ns=NOW - HOUR, whole_ns=NOW - 2 * HOUR)
    assert read_from(mark, NOW) == NOW - HOUR


def test_a_whole_read_long_ago_is_read_whole_again() -> None:
    mark = Mark(through_ns=NOW - HOUR, whole_ns=NOW - WHOLE_AGAIN_NS - 1)
    assert read_from(mark, NOW) == 0
    # Up to the limit itself, the mark still holds.
    assert read_from(mark._replace(whole_ns=NOW - WHOLE_AGAIN_NS), NOW) == NOW - HOUR


def test_a_clock_set_back_below_the_mark_reads_whole() -> None:
    # libxmtp stamps with the clock: a message stored now may lie below the mark.
    mark = Mark(through_ns=NOW + HOUR, whole_ns=NOW + HOUR)
    assert read_from(mark, NOW) == 0
