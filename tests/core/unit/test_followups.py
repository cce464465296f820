"""The follow-up syncs' scheduler (cone/core/intake/followups.py), over a fake sync."""

from __future__ import annotations

import asyncio
from collections import Counter

from cone.core.intake.followups import FollowUps
from cone.errors import Unavailable
from support.waiting import until, until_parked


async def test_a_burst_is_synced_by_one_task_each_conversation_once_per_step_a_few_at_once() -> (
    None
):
    synced: Counter[str] = Counter()
    marked: Counter[str] = Counter()
    running = 0
    most = 0
    release = asyncio.Event()

    async def sync(cid: str) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1
        synced[cid] += 1

    follow = FollowUps(sync, lambda cid: marked.update([cid]), delays=(0.0, 0.01, 0.02), parallel=3)
    before = len(asyncio.all_tasks())
    ids = [f"{i:02x}" for i in range(40)]
    for cid in ids + ids[:10]:  # a conversation reported twice keeps one schedule
        follow.add(cid)
    assert follow.pending() == 40
    assert len(asyncio.all_tasks()) == before + 1  # one worker for the whole burst

    async def busy() -> bool:
        await asyncio.sleep(0)
        return running == 3

    await until(busy)
    release.set()

    async def drained() -> bool:
        return follow.pending() == 0

    await until(drained)
    assert most == 3
    assert synced == dict.fromkeys(ids, 3)
    assert marked == dict.fromkeys(ids, 3)
    await follow.stop()


async def test_a_failed_follow_up_sync_still_reads_the_conversation_and_goes_on() -> None:
    marked: list[str] = []
    calls = 0

    async def sync(cid: str) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise Unavailable("syncing a conversation did not finish in 120 s")

    follow = FollowUps(sync, marked.append, delays=(0.0, 0.01))
    follow.add("ab")

    async def drained() -> bool:
        return follow.pending() == 0

    await until(drained)
    assert calls == 2
    assert marked == ["ab", "ab"]
    await follow.stop()


async def test_caught_up_waits_until_no_more_wait_than_the_workers_take_at_most_its_limit() -> None:
    release = asyncio.Event()

    async def sync(cid: str) -> None:
        await release.wait()

    follow = FollowUps(sync, lambda cid: None, delays=(0.0, 0.01), parallel=2)
    assert await follow.caught_up(0.0)  # nothing pending: at once
    follow.add("ab")
    follow.add("cd")
    assert await follow.caught_up(0.0)  # as many as the workers take: not behind
    follow.add("ef")
    assert not await follow.caught_up(0.05)  # one more, and the syncs are held
    waiting = asyncio.create_task(follow.caught_up(10.0))
    await until_parked(waiting)  # it waits for the held syncs
    release.set()
    assert await waiting  # caught up before the limit
    for cid in ("gh", "ij", "kl"):
        follow.add(cid)  # behind again until stopped, which drops them
    assert not await follow.caught_up(0.0)
    await follow.stop()
    assert await follow.caught_up(0.0)


async def test_first_syncs_go_before_later_ones_and_none_waits_for_a_batch_to_end() -> None:
    """The bad timing forced: one sync is held while a burst keeps arriving. The
    other worker goes on: each new conversation's first sync goes ahead of the
    later syncs already due, and none waits for the held one."""
    order: list[tuple[str, int]] = []
    steps: Counter[str] = Counter()
    held = asyncio.Event()

    async def sync(cid: str) -> None:
        order.append((cid, steps[cid]))
        steps[cid] += 1
        if cid == "held":
            await held.wait()

    follow = FollowUps(sync, lambda cid: None, delays=(0.0, 0.0, 0.0), parallel=2)
    follow.add("held")
    follow.add("a")

    async def a_done() -> bool:
        return steps["a"] == 3

    await until(a_done)  # all of a's steps while "held" holds the other worker
    assert steps["held"] == 1
    for cid in ("b", "c"):
        follow.add(cid)

    async def c_done() -> bool:
        return steps["c"] == 3

    await until(c_done)
    after_a = [item for item in order if item[0] in ("b", "c")]
    assert after_a[:2] == [("b", 0), ("c", 0)]  # first syncs ahead of b's later ones
    held.set()

    async def drained() -> bool:
        return follow.pending() == 0

    await until(drained)
    assert steps == {"held": 3, "a": 3, "b": 3, "c": 3}
    await follow.stop()
