"""Server streams below libxmtp: headers, catch-up, live order, reconnects, endings."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import grpc
import pytest

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
