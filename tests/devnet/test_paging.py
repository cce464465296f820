"""Paging rules (node-go's) and the store's pages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cone.devnet.paging import (
    DIRECTION_ASCENDING,
    DIRECTION_DESCENDING,
    DIRECTION_UNSPECIFIED,
    MAX_PAGE_SIZE,
    Page,
    resolve,
)
from cone.devnet.store import GroupMessageRow, Store


@pytest.mark.parametrize(
    ("direction", "ascending"),
    [(DIRECTION_UNSPECIFIED, False), (DIRECTION_ASCENDING, True), (DIRECTION_DESCENDING, False)],
)
def test_an_unspecified_direction_means_descending(direction: int, ascending: bool) -> None:
    assert resolve(direction, 10, 0).ascending is ascending


def test_an_unspecified_direction_can_default_to_ascending() -> None:
    assert resolve(DIRECTION_UNSPECIFIED, 10, 0, default_ascending=True).ascending


@given(limit=st.integers(min_value=-5, max_value=10_000))
def test_a_page_is_never_empty_nor_above_100(limit: int) -> None:
    size = resolve(DIRECTION_ASCENDING, limit, 0).limit
    assert size == (limit if 1 <= limit <= MAX_PAGE_SIZE else MAX_PAGE_SIZE)


def test_the_response_cursor_is_the_last_id_only_on_a_full_page() -> None:
    page = Page(ascending=True, limit=3, cursor=0)
    assert page.next_cursor([4, 5, 9]) == 9
    assert page.next_cursor([4, 5]) == 0
    assert page.next_cursor([]) == 0


@given(
    count=st.integers(min_value=0, max_value=250),
    limit=st.integers(min_value=0, max_value=120),
    ascending=st.booleans(),
)
def test_following_cursors_visits_every_stored_row_once_in_order(
    count: int, limit: int, ascending: bool
) -> None:
    store = Store()
    try:
        rows = [
            GroupMessageRow(0, 0, b"g", bytes([i % 256, i // 256]), b"", False, False)
            for i in range(count)
        ]
        store.add_group_messages(rows, 1)
        store.add_group_messages([GroupMessageRow(0, 0, b"other", b"x", b"", False, False)], 1)
        direction = DIRECTION_ASCENDING if ascending else DIRECTION_DESCENDING
        seen: list[int] = []
        cursor = 0
        while True:
            page = resolve(direction, limit, cursor)
            ids = [r.id for r in store.group_messages(b"g", page)]
            seen += ids
            cursor = page.next_cursor(ids)
            if cursor == 0:
                break
        assert len(seen) == count
        assert seen == sorted(seen, reverse=not ascending)
    finally:
        store.close()
