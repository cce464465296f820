"""The walk over a conversation's messages in libxmtp's insertion-stamp order.

libxmtp 1.10's insertion stamps repeat (docs/guarantees.md), and a listing only
filters on "stamp above". The walk must neither skip nor repeat a message wherever a
run of equal stamps falls against the page size. The listing here is a stand-in for
libxmtp's `find_messages` (its filter, order and limit): the logic under test is the
walk's, through the engine's real offload.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xmtp_bindings import xmtpv3 as ffi

from cone.engine import _reads
from cone.engine._calls import Calls
from cone.engine._offload import Offload
from cone.engine._reads import Reads

CONVERSATION = "ab" * 16


@dataclass(frozen=True)
class _Stored:
    id: bytes
    inserted_at_ns: int
    sender_inbox_id: str = "peer"
    sent_at_ns: int = 0
    content: bytes = b""
    kind: Any = ffi.FfiConversationMessageKind.APPLICATION


class _Listing:
    """One conversation's stored messages, listed as libxmtp lists them: stamp above
    the cursor, ascending (ties in the order they were stored), at most `limit`."""

    def __init__(self, stamps: list[int]) -> None:
        self.stored = [_Stored(i.to_bytes(4, "big"), s) for i, s in enumerate(stamps)]
        self.limits: list[int] = []

    def conversation(self, _key: bytes) -> _Listing:
        return self

    async def find_messages(self, opts: Any) -> list[_Stored]:
        self.limits.append(opts.limit)
        above = [m for m in self.stored if m.inserted_at_ns > (opts.inserted_after_ns or 0)]
        return sorted(above, key=lambda m: m.inserted_at_ns)[: opts.limit]


@pytest.fixture(scope="module")
def calls() -> Iterator[Calls]:
    offload = Offload()
    yield Calls(offload)
    offload.close()


def _walk(listing: _Listing, calls: Calls, after: int) -> tuple[list[str], list[list[str]]]:
    reads = Reads(lambda: listing, calls, "me")

    async def both() -> tuple[list[str], list[list[str]]]:
        joined = [m.id for m in await reads.messages_since(CONVERSATION, after)]
        pages = [[m.id for m in p] async for p in reads.message_pages(CONVERSATION, after)]
        return joined, pages

    return asyncio.run(both())


@settings(max_examples=150, deadline=None)
@given(
    stamps=st.lists(st.integers(1, 12), max_size=40),
    after=st.integers(0, 6),
    page=st.integers(1, 5),
)
def test_every_message_above_the_stamp_comes_once_in_stamp_order(
    stamps: list[int], after: int, page: int, calls: Calls
) -> None:
    listing = _Listing(stamps)
    with mock.patch.object(_reads, "PAGE", page):
        joined, pages = _walk(listing, calls, after)

    expected = {m.id.hex() for m in listing.stored if m.inserted_at_ns > after}
    assert sorted(joined) == sorted(expected)  # every one, none twice
    stamp = {m.id.hex(): m.inserted_at_ns for m in listing.stored}
    assert [stamp[i] for i in joined] == sorted(stamp[i] for i in joined)
    assert [i for p in pages for i in p] == joined
    assert all(pages[:-1]), "only the last page may be empty"


def test_a_run_of_equal_stamps_longer_than_a_page_widens_the_page(
    calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_reads, "PAGE", 2)
    listing = _Listing([1, 2, 2, 2, 2, 2, 3])
    joined, pages = _walk(listing, calls, 0)

    assert len(joined) == 7
    # The first page ends inside the run of 2s; the next, from just below 2, is
    # widened (2, 4, 8) until it reaches past the run, and drops the 2 already read.
    assert [len(p) for p in pages] == [2, 5]
    assert listing.limits == [2, 2, 4, 8] * 2  # messages_since's walk, then the pages'
