"""Server streams below libxmtp: headers, catch-up, live order, reconnects, endings,
and the hub's fan-out to narrow and wide subscriptions."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cone.devnet import Devnet, hub
from conepb.xmtp import mls_api_pb2 as mls
from support import wire

WAIT_S = 10.0
Filter = mls.SubscribeGroupMessagesRequest.Filter


def _subscribe(n: wire.Node, *filters: Filter) -> grpc.aio.UnaryStreamCall:
    return n.mls.SubscribeGroupMessages(mls.SubscribeGroupMessagesRequest(filters=list(filters)))


async def _read(call: grpc.aio.UnaryStreamCall, count: int) -> list[int]:
    ids = []
    async with asyncio.timeout(WAIT_S):
        for _ in range(count):
            message = await call.read()
            assert message is not grpc.aio.EOF
            ids.append(message.v1.id)
    return ids


async def _all_ids(n: wire.Node, group: bytes) -> list[int]:
    ids, cursor = [], 0
    while True:
        page = await wire.query(n, group, direction=mls.SORT_DIRECTION_ASCENDING, cursor=cursor)
        ids += [m.v1.id for m in page.messages]
        cursor = page.paging_info.id_cursor
        if not cursor:
            return ids


async def test_headers_arrive_at_once_and_an_empty_filter_list_stays_open(
    devnet_node: Devnet,
) -> None:
    async with wire.node(devnet_node.url) as n:
        call = _subscribe(n)
        async with asyncio.timeout(WAIT_S):
            metadata = await call.initial_metadata()
        assert ("subscribed", "true") in list(metadata)
        await wire.send(n, os.urandom(16), 3)
        assert not call.done() and devnet_node.open_streams == 1
        call.cancel()


async def test_a_stream_replays_above_its_cursor_then_goes_live_in_order(devnet: str) -> None:
    async with wire.node(devnet) as n:
        group, other = os.urandom(16), os.urandom(16)
        await wire.send(n, group, 120)  # more than one history page
        await wire.send(n, other, 2)
        stored = await _all_ids(n, group)
        call = _subscribe(n, Filter(group_id=group, id_cursor=stored[4]))
        assert await _read(call, 115) == stored[5:]
        await wire.send(n, group, 3)
        await wire.send(n, other, 1)  # not subscribed: never delivered
        assert await _read(call, 3) == (await _all_ids(n, group))[-3:]
        call.cancel()


async def test_a_stream_over_many_topics_replays_what_is_above_each_cursor_then_goes_live(
    devnet: str,
) -> None:
    """A client's stream over all its conversations (more than `hub.WIDE` topics,
    most with nothing above their cursors) catches up and goes live as a stream over
    one does; a topic named twice starts from its lower cursor."""
    async with wire.node(devnet) as n:
        groups = [os.urandom(16) for _ in range(hub.WIDE * 2)]
        caught_up, behind, twice, quiet = groups[:4]
        outside = os.urandom(16)
        for group in (caught_up, behind, twice):
            await wire.send(n, group, 2)
        await wire.send(n, outside)
        cursors = {g: (await _all_ids(n, g) or [0])[-1] for g in groups}
        cursors[behind] = (await _all_ids(n, behind))[0]
        filters = [Filter(group_id=g, id_cursor=c) for g, c in cursors.items()]
        filters.append(Filter(group_id=twice, id_cursor=0))
        call = _subscribe(n, *filters)
        narrow = _subscribe(n, Filter(group_id=quiet))  # one topic: indexed by it
        replayed = await _read(call, 3)
        assert replayed == (await _all_ids(n, behind))[1:] + await _all_ids(n, twice)
        await wire.send(n, outside)  # not named: never delivered
        await wire.send(n, quiet)
        (live,) = await _all_ids(n, quiet)
        assert await _read(call, 1) == [live]
        assert await _read(narrow, 1) == [live]
        call.cancel()
        narrow.cancel()


async def test_an_empty_topic_among_many_filters_is_refused_by_its_place(devnet: str) -> None:
    async with wire.node(devnet) as n:
        filters = [Filter(group_id=os.urandom(16)) for _ in range(100)]
        filters[57].group_id = b""
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _read(_subscribe(n, *filters), 1)
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "filters[57].group_id is empty" in (refused.value.details() or "")


async def test_streams_are_gapless_and_without_repeats_across_reconnects_under_load(
    devnet: str,
) -> None:
    async with wire.node(devnet) as n:
        group = os.urandom(16)
        total = 300

        async def sender() -> None:
            for _ in range(total):
                await wire.send(n, group)

        sending = asyncio.create_task(sender())
        seen: list[int] = []
        cursor = 0
        while len(seen) < total:  # reconnect from the last id every 40 messages
            call = _subscribe(n, Filter(group_id=group, id_cursor=cursor))
            batch = await _read(call, min(40, total - len(seen)))
            call.cancel()
            seen += batch
            cursor = seen[-1]
        await sending
        assert seen == await _all_ids(n, group)


async def test_dropped_and_shut_down_streams_end_with_unavailable() -> None:
    node = Devnet(port=0)
    async with node as url, wire.node(url) as n:
        group = os.urandom(16)
        call = _subscribe(n, Filter(group_id=group))
        await call.initial_metadata()
        assert node.faults.drop_streams() == 1
        with pytest.raises(grpc.aio.AioRpcError) as dropped:
            await _read(call, 1)
        assert dropped.value.code() is grpc.StatusCode.UNAVAILABLE
        again = _subscribe(n, Filter(group_id=group))
        await wire.send(n, group)
        assert len(await _read(again, 1)) == 1  # new streams are served normally
        await node.stop()
        with pytest.raises(grpc.aio.AioRpcError) as stopped:
            await _read(again, 1)
        assert stopped.value.code() is grpc.StatusCode.UNAVAILABLE


async def test_a_welcome_stream_needs_a_filter_and_delivers_by_key(devnet: str) -> None:
    async with wire.node(devnet) as n:
        empty = n.mls.SubscribeWelcomeMessages(mls.SubscribeWelcomeMessagesRequest())
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await empty.read()
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        key = os.urandom(32)
        welcome = mls.WelcomeMessageInput(
            v1=mls.WelcomeMessageInput.V1(installation_key=key, data=b"w", hpke_public_key=b"k")
        )
        await n.mls.SendWelcomeMessages(mls.SendWelcomeMessagesRequest(messages=[welcome]))
        call = n.mls.SubscribeWelcomeMessages(
            mls.SubscribeWelcomeMessagesRequest(
                filters=[mls.SubscribeWelcomeMessagesRequest.Filter(installation_key=key)]
            )
        )
        async with asyncio.timeout(WAIT_S):
            first = await call.read()
            await n.mls.SendWelcomeMessages(mls.SendWelcomeMessagesRequest(messages=[welcome]))
            welcome.v1.data = b"w2"
            await n.mls.SendWelcomeMessages(mls.SendWelcomeMessagesRequest(messages=[welcome]))
            second = await call.read()
        assert (first.v1.data, second.v1.data) == (b"w", b"w2")  # the duplicate was skipped
        call.cancel()


@dataclass(frozen=True)
class _Row:
    id: int
    topic: bytes


async def test_a_subscriber_too_slow_for_its_buffer_is_cut_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hub, "MAX_BUFFERED", 3)
    live: hub.Hub[_Row] = hub.Hub()
    sub = live.subscribe([b"t"])
    live.publish(_Row(i, b"t") for i in range(1, 5))
    with pytest.raises(hub.StreamEnded) as ended:
        await sub.next()
    assert ended.value.reason is hub.EndReason.TOO_SLOW


_topics = st.sampled_from([bytes([i]) for i in range(3 * hub.WIDE)])
_subscriptions = st.lists(
    st.tuples(
        st.frozensets(_topics, max_size=2 * hub.WIDE),  # subscribed to
        st.frozensets(_topics, max_size=hub.WIDE),  # attached later (empty: none)
        st.booleans(),  # unsubscribed before the rows
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(subscriptions=_subscriptions, rows=st.lists(_topics, max_size=40))
def test_the_hub_hands_each_row_once_in_order_to_exactly_the_subscriptions_of_its_topic(
    subscriptions: list[tuple[frozenset[bytes], frozenset[bytes], bool]], rows: list[bytes]
) -> None:
    """Wide subscriptions (matched by their topic set) and narrow ones (indexed by
    topic), attached to and unsubscribed, see the same rows."""
    live: hub.Hub[_Row] = hub.Hub()
    subs = []
    for topics, attached, gone in subscriptions:
        sub = live.subscribe(topics)
        if attached:
            live.attach(sub, attached)
        subs.append((sub, topics | attached, gone))
    for sub, _, gone in subs:
        if gone:
            live.unsubscribe(sub)
            live.unsubscribe(sub)  # twice, as a stream's end does
    published = [_Row(i, topic) for i, topic in enumerate(rows, 1)]
    live.publish(published)
    for sub, topics, gone in subs:
        expected = [] if gone else [r for r in published if r.topic in topics]
        assert list(sub._rows) == expected
    assert len(live) == sum(not gone for _, _, gone in subs)
