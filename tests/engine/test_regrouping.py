"""Renewing the message streams after consent changes (cone/engine/_subscriptions.py)
and a renewal itself (cone/engine/streams.py), as pure logic: stand-in streams and
subscriptions; the real ones are in test_consent_streams.py."""

from __future__ import annotations

import asyncio
from typing import Any

from cone.engine._subscriptions import Regrouping
from cone.engine.streams import StreamHandle, SupervisedStream
from support.waiting import until


class _Stream:
    def __init__(self, name: str) -> None:
        self.name = name
        self.renewals: list[float] = []

    def renew(self) -> None:
        self.renewals.append(asyncio.get_running_loop().time())


async def test_changes_close_together_renew_the_message_streams_once_per_interval() -> None:
    streams = [_Stream("messages"), _Stream("requests"), _Stream("conversations")]
    regrouping = Regrouping(lambda: streams, interval_s=0.3)  # type: ignore[arg-type,return-value]
    loop = asyncio.get_running_loop()
    regrouping.request()
    regrouping.request()
    await asyncio.sleep(0.05)
    messages, requests, conversations = streams
    assert len(messages.renewals) == len(requests.renewals) == 1  # at once, and once
    assert conversations.renewals == []  # not a message stream
    first = messages.renewals[0]

    regrouping.request()  # a change soon after: waits out the interval
    regrouping.request()
    await asyncio.sleep(0.05)
    assert len(messages.renewals) == 1

    async def renewed_again() -> bool:
        return len(messages.renewals) == 2

    await until(renewed_again)
    assert messages.renewals[1] - first >= 0.3
    assert len(requests.renewals) == 2

    await asyncio.sleep(0.35)  # quiet for longer than the interval: the next is at once
    asked = loop.time()
    regrouping.request()
    await until(lambda: _at_least(messages, 3))
    assert messages.renewals[2] - asked < 0.3

    regrouping.request()
    regrouping.cancel()  # stopping: the renewal still waiting is dropped
    await asyncio.sleep(0.4)
    assert len(messages.renewals) == 3


async def _at_least(stream: _Stream, n: int) -> bool:
    return len(stream.renewals) >= n


class _Subscriptions:
    """Opens stand-in subscriptions, each closed by `end` or by `close_all`."""

    def __init__(self) -> None:
        self.opened = 0
        self.ended = 0
        self.callbacks: list[Any] = []

    async def open(self, callback: Any) -> StreamHandle:
        self.opened += 1
        self.callbacks.append(callback)

        async def end() -> None:
            self.ended += 1
            callback.closed.set()

        return StreamHandle(end)


async def test_a_renewal_reopens_at_once_and_is_no_restart() -> None:
    subs = _Subscriptions()
    restarts: list[None] = []
    errors: list[str] = []
    stream = SupervisedStream(
        "messages",
        subs.open,
        convert=lambda item: item,
        on_item=lambda item: None,
        on_restart=lambda: restarts.append(None),
        on_error=errors.append,
    )
    await stream.start()
    try:
        assert subs.opened == 1
        stream.renew()

        async def reopened() -> bool:
            return subs.opened == 2

        await until(reopened)
        assert subs.ended == 1  # the old subscription was closed first
        assert stream.health.connected
        assert (stream.health.restarts, restarts, errors) == (0, [], [])

        # A subscription that the node ends is still a restart, told as before.
        subs.callbacks[-1].closed.set()

        async def restarted() -> bool:
            return subs.opened == 3

        await until(restarted)
        assert stream.health.restarts == 1
        assert restarts == [None]
        assert errors == [""]
    finally:
        await stream.stop()
