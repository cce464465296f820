"""Renewing the message streams after consent changes (cone/engine/_subscriptions.py)
and a renewal itself (cone/engine/streams.py), as pure logic: stand-in streams and
subscriptions; the real ones are in test_consent_streams.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cone.engine._subscriptions import Regrouping
from cone.engine.port import XmtpConsent
from cone.engine.streams import StreamHandle, SupervisedStream
from support.clock import ManualClock
from support.waiting import until


class _Stream:
    def __init__(self, name: str, clock: ManualClock) -> None:
        self.name = name
        self.renewals: list[float] = []
        self._clock = clock

    def renew(self) -> None:
        self.renewals.append(self._clock.time())


def _streams(clock: ManualClock) -> dict[str, _Stream]:
    return {n: _Stream(n, clock) for n in ("messages", "requests", "accepted", "conversations")}


def _regrouping(
    streams: dict[str, _Stream], clock: ManualClock, interval_s: float, limit: int | None = None
) -> Regrouping:
    return Regrouping(lambda: streams.values(), interval_s, limit, clock)  # type: ignore[arg-type,return-value]


def test_changes_close_together_renew_the_message_streams_once_per_interval() -> None:
    clock = ManualClock()
    streams = _streams(clock)
    regrouping = _regrouping(streams, clock, interval_s=0.3)
    regrouping.changed("aa", XmtpConsent.ALLOWED)
    regrouping.changed("bb", XmtpConsent.DENIED)
    clock.advance()
    accepted, requests = streams["accepted"], streams["requests"]
    assert accepted.renewals == requests.renewals == [0.0]  # at once, and once
    # "messages" is not renewed for one conversation; nor is a stream of conversations.
    assert streams["messages"].renewals == streams["conversations"].renewals == []

    clock.advance(0.1)
    regrouping.changed("cc", XmtpConsent.ALLOWED)  # a change soon after: waits out the interval
    regrouping.changed("dd", XmtpConsent.UNKNOWN)
    clock.advance(0.19)
    assert len(accepted.renewals) == 1
    clock.advance(0.01)
    assert accepted.renewals == requests.renewals == [0.0, pytest.approx(0.3)]

    clock.advance(0.35)  # quiet for longer than the interval: the next is at once
    asked = clock.time()
    regrouping.changed("ee", XmtpConsent.DENIED)
    clock.advance()
    assert requests.renewals[2] == asked
    assert len(accepted.renewals) == 2  # "ee" was never on it: not renewed for it

    regrouping.changed("ff", XmtpConsent.ALLOWED)
    regrouping.cancel()  # stopping: the renewal still waiting is dropped
    clock.advance(1.0)
    assert len(requests.renewals) == 3


def test_accepted_carries_allowed_conversations_until_messages_takes_them() -> None:
    clock = ManualClock()
    streams = _streams(clock)
    regrouping = _regrouping(streams, clock, interval_s=0.01, limit=2)
    regrouping.changed("aa", XmtpConsent.ALLOWED)
    regrouping.changed("bb", XmtpConsent.ALLOWED)
    regrouping.changed("cc", XmtpConsent.DENIED)  # never allowed: on no subscription of its own
    assert list(regrouping.recent) == ["aa", "bb"]
    regrouping.changed("aa", XmtpConsent.UNKNOWN)  # reset: off "accepted" again
    regrouping.changed("aa", XmtpConsent.DENIED)
    assert list(regrouping.recent) == ["bb"]
    clock.advance()
    assert len(streams["accepted"].renewals) == 1
    regrouping.changed("dd", XmtpConsent.ALLOWED)
    clock.advance(0.01)
    assert len(streams["accepted"].renewals) == 2
    assert list(regrouping.recent) == ["bb", "dd"]  # at the limit, not above it
    assert streams["messages"].renewals == []

    regrouping.changed("ee", XmtpConsent.ALLOWED)  # one more: "messages" takes them all
    clock.advance(0.01)
    assert len(streams["messages"].renewals) == 1
    assert list(regrouping.recent) == []
    assert len(streams["accepted"].renewals) == len(streams["requests"].renewals) == 3
    assert streams["conversations"].renewals == []


class _Subscriptions:
    """Opens stand-in subscriptions, each closed by `end`; an open waits while `hold`
    is clear, and raises `refuse` when set."""

    def __init__(self) -> None:
        self.asked = 0
        self.opened = 0
        self.ended = 0
        self.callbacks: list[Any] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.refuse: Exception | None = None

    async def open(self, callback: Any) -> StreamHandle:
        self.asked += 1
        await self.hold.wait()
        if self.refuse is not None:
            raise self.refuse
        self.opened += 1
        self.callbacks.append(callback)

        async def end() -> None:
            self.ended += 1
            callback.closed.set()

        return StreamHandle(end)


def _stream(
    subs: _Subscriptions, items: list[Any], restarts: list[None], errors: list[str]
) -> SupervisedStream:
    return SupervisedStream(
        "messages",
        subs.open,
        convert=lambda item: item,
        on_item=items.append,
        on_restart=lambda: restarts.append(None),
        on_error=errors.append,
    )


async def test_a_renewal_opens_the_fresh_subscription_before_it_closes_the_open_one() -> None:
    subs = _Subscriptions()
    items: list[Any] = []
    restarts: list[None] = []
    errors: list[str] = []
    stream = _stream(subs, items, restarts, errors)
    await stream.start()
    try:
        assert subs.opened == 1
        subs.hold.clear()  # the fresh subscription takes its time, as in a big store
        stream.renew()

        async def asked() -> bool:
            return subs.asked == 2

        await until(asked)
        # Meanwhile the open subscription is neither closed nor deaf.
        subs.callbacks[0].on_message("meanwhile")
        await until(lambda: _has(items, "meanwhile"))
        assert subs.ended == 0
        assert stream.health.connected

        subs.hold.set()

        async def swapped() -> bool:
            return subs.ended == 1

        await until(swapped)
        assert subs.opened == 2
        assert subs.callbacks[0].closed.is_set()  # the old one, once the fresh was ready
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
    assert subs.ended == 2  # stopping closed the last one


async def test_a_fresh_subscription_that_fails_ends_the_open_one_and_restarts() -> None:
    subs = _Subscriptions()
    restarts: list[None] = []
    errors: list[str] = []
    stream = _stream(subs, [], restarts, errors)
    await stream.start()
    try:
        subs.refuse = ConnectionError("the node refused it")
        stream.renew()

        async def failed() -> bool:
            return stream.health.restarts == 1

        await until(failed)
        assert subs.ended == 1  # not left open beside the retries
        assert not stream.health.connected
        assert stream.health.last_error == "the node refused it"
        assert errors == ["the node refused it"]

        subs.refuse = None  # the node is back: reopened after the backoff, as a restart

        async def reopened() -> bool:
            return subs.opened == 2 and restarts == [None]

        await until(reopened)
        assert stream.health.connected
    finally:
        await stream.stop()


async def _has(items: list[Any], item: Any) -> bool:
    return item in items


def test_a_conversation_messages_carries_leaves_accepted_and_never_joins_it() -> None:
    clock = ManualClock()
    streams = _streams(clock)
    regrouping = _regrouping(streams, clock, interval_s=0.01, limit=2)
    accepted, requests = streams["accepted"], streams["requests"]
    regrouping.changed("aa", XmtpConsent.ALLOWED)
    clock.advance()
    assert len(accepted.renewals) == 1
    assert list(regrouping.recent) == ["aa"]

    regrouping.carried_by_messages("aa")  # "messages" handed over one of its messages
    assert list(regrouping.recent) == []
    clock.advance(0.01)
    assert len(accepted.renewals) == 2  # without it
    assert len(requests.renewals) == 1  # no consent changed: "requests" stays as it is

    regrouping.carried_by_messages("bb")  # carried, and never on "accepted"
    regrouping.changed("bb", XmtpConsent.ALLOWED)  # its consent set afterwards
    assert list(regrouping.recent) == []
    clock.advance(1.0)
    # Nothing to move: "messages" took it in allowed, so "requests" never had it.
    assert len(requests.renewals) == 1 and len(accepted.renewals) == 2

    regrouping.changed("bb", XmtpConsent.DENIED)  # a fresh "messages" would leave it out
    regrouping.carried_by_messages("bb")  # the open one hands over one more meanwhile
    regrouping.changed("bb", XmtpConsent.ALLOWED)  # allowed again: "accepted" carries it
    assert list(regrouping.recent) == ["bb"]

    for cid in ("cc", "dd"):  # past the limit: "messages" takes them all
        regrouping.changed(cid, XmtpConsent.ALLOWED)
    clock.advance()
    assert len(streams["messages"].renewals) == 1
    assert regrouping.carried == set()  # its fresh subscription carries what is allowed now


def test_what_the_engine_makes_stays_off_accepted_and_changes_meanwhile_wait() -> None:
    clock = ManualClock()
    streams = _streams(clock)
    regrouping = _regrouping(streams, clock, interval_s=0.01)
    with regrouping.creating() as made:
        # libxmtp tells the consent stream of the conversation it makes, during the call.
        regrouping.changed("new", XmtpConsent.ALLOWED)
        regrouping.changed("other", XmtpConsent.ALLOWED)  # another installation's change
        regrouping.changed("other", XmtpConsent.DENIED)
        regrouping.changed("third", XmtpConsent.ALLOWED)
        with regrouping.creating():  # a second call at once: the changes wait for both
            pass
        assert not regrouping.recent
        made("new")
    # The one it made is carried by "messages"; the others come in their order.
    assert regrouping.carried == {"new"}
    assert list(regrouping.recent) == ["third"]
    clock.advance(1.0)
    assert len(streams["accepted"].renewals) == 1
    assert len(streams["requests"].renewals) == 1  # for "other" and "third"
    regrouping.changed("new", XmtpConsent.ALLOWED)  # told again: nothing to move
    clock.advance(1.0)
    assert list(regrouping.recent) == ["third"]
    assert len(streams["accepted"].renewals) == len(streams["requests"].renewals) == 1
    # Blocked and allowed again, it joins "accepted": a fresh subscription of
    # "messages" meanwhile would have left it out.
    regrouping.changed("new", XmtpConsent.DENIED)
    regrouping.changed("new", XmtpConsent.ALLOWED)
    assert list(regrouping.recent) == ["third", "new"]


def test_a_call_that_made_nothing_holds_changes_only_while_it_runs() -> None:
    clock = ManualClock()
    regrouping = _regrouping(_streams(clock), clock, interval_s=0.01)
    try:
        with regrouping.creating():
            regrouping.changed("aa", XmtpConsent.ALLOWED)
            raise RuntimeError("the call failed")
    except RuntimeError:
        pass
    assert list(regrouping.recent) == ["aa"] and not regrouping.carried
    regrouping.changed("bb", XmtpConsent.ALLOWED)
    assert list(regrouping.recent) == ["aa", "bb"]
