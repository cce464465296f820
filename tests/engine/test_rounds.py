"""A conversation's publication rounds: one running, one waiting, shared by its sends
(cone/engine/_rounds.py), on a stand-in for libxmtp's `publish_messages`."""

from __future__ import annotations

import asyncio

import pytest

from cone.engine._rounds import Rounds

A, B = b"a" * 32, b"b" * 32


class Publisher:
    """`publish_messages` of one conversation: each round waits for its own release."""

    def __init__(self) -> None:
        self.rounds: list[asyncio.Event] = []
        self.fail: list[Exception | None] = []
        self._began = asyncio.Condition()

    async def __call__(self) -> None:
        release = asyncio.Event()
        self.rounds.append(release)
        async with self._began:
            self._began.notify_all()
        await release.wait()
        if self.fail and (err := self.fail.pop(0)) is not None:
            raise err

    async def started(self, n: int) -> None:
        async with self._began:
            await asyncio.wait_for(self._began.wait_for(lambda: len(self.rounds) >= n), 5)


async def test_sends_queued_during_a_round_share_the_next_one() -> None:
    rounds, publish = Rounds(), Publisher()
    first = asyncio.create_task(rounds.publish(A, publish))
    await publish.started(1)
    later = [asyncio.create_task(rounds.publish(A, publish)) for _ in range(5)]
    await asyncio.sleep(0.01)
    assert len(publish.rounds) == 1  # the five wait for a round that starts after them

    publish.rounds[0].set()
    await first
    await publish.started(2)
    assert not any(t.done() for t in later)
    publish.rounds[1].set()
    await asyncio.gather(*later)
    assert len(publish.rounds) == 2


async def test_conversations_have_rounds_of_their_own() -> None:
    rounds, in_a, in_b = Rounds(), Publisher(), Publisher()
    a = asyncio.create_task(rounds.publish(A, in_a))
    b = asyncio.create_task(rounds.publish(B, in_b))
    await in_a.started(1)
    await in_b.started(1)
    in_b.rounds[0].set()
    await b
    assert not a.done()
    in_a.rounds[0].set()
    await a


async def test_a_failed_round_fails_everyone_waiting_on_it_and_the_next_starts_afresh() -> None:
    rounds, publish = Rounds(), Publisher()
    publish.fail = [None, RuntimeError("the node is gone"), None]
    first = asyncio.create_task(rounds.publish(A, publish))
    await publish.started(1)
    waiting = [asyncio.create_task(rounds.publish(A, publish)) for _ in range(3)]
    publish.rounds[0].set()
    await first
    await publish.started(2)
    publish.rounds[1].set()
    failed = await asyncio.gather(*waiting, return_exceptions=True)
    assert [str(e) for e in failed] == ["the node is gone"] * 3

    again = asyncio.create_task(rounds.publish(A, publish))
    await publish.started(3)
    publish.rounds[2].set()
    await again


async def test_a_cancelled_send_leaves_its_round_to_the_others() -> None:
    rounds, publish = Rounds(), Publisher()
    first = asyncio.create_task(rounds.publish(A, publish))
    await publish.started(1)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    other = asyncio.create_task(rounds.publish(A, publish))
    await asyncio.sleep(0.01)
    assert len(publish.rounds) == 1  # the round goes on, the other waits for the next
    publish.rounds[0].set()
    await publish.started(2)
    publish.rounds[1].set()
    await other
