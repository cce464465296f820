"""Retries, parking and crashes: exactly one reply per turn whatever happens."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conepb.v1 import cone_pb2 as pb
from support.peers import Peer
from support.waiting import until

from ._helpers import accept, alive, dm_to, now, parked, settled, texts_when
from .conftest import Agent, BridgeProcess

FAST = ["--backoff", "0.05", "-v"]


async def _restart_then_each_turn_answers_once(
    bridge: BridgeProcess, alice: Peer, dm: Any, agent: Agent, answered_on: int = 1
) -> None:
    """Restart the crashed bridge: the turn of "question" ends answered once (its
    answer from attempt `answered_on`), and the next message is a turn of its own,
    answered once."""
    await bridge.restart()
    await settled(bridge)
    await alice.send(dm, "next")
    texts = await texts_when(alice, dm, 4)
    assert texts == ["question", f"answer number {answered_on}", "next", "answer number 1"]
    ends = [(e["texts"], e["attempt"]) for e in agent.events("end")]
    assert ends == [(["question"], answered_on), (["next"], 1)]
    await settled(bridge)
    assert len(await alice.texts(bytes(dm.id()))) == 4


# An agent whose first attempt hangs (until the bridge, killed, restarts and stops it).
_STUCK_ONCE = """\
    marker = os.path.join(os.path.dirname(LOG), "ran-once")
    if not os.path.exists(marker):
        open(marker, "w").close()
        time.sleep(3600)
    note("end")
    print("answer number %d" % turn["attempt"])
    """


async def context_pending(bridge: BridgeProcess, n: int) -> bool:
    """Whether the bridge's context consumer is known and has `n` messages pending."""
    status = await bridge.client.call("Status", pb.StatusRequest())
    return any(c.consumer == "bridge.context" and c.pending == n for c in status.consumers)


async def test_a_command_that_fails_twice_then_succeeds_replies_once(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    flaky = agent(
        """\
        if turn["attempt"] < 3:
            note("fail")
            sys.exit(1)
        note("end")
        print("third time lucky")
        """
    )
    async with BridgeProcess(home, devnet, flaky.argv, FAST) as bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "try me")
        await accept(bridge, dm)
        assert await texts_when(alice, dm, 2) == ["try me", "third time lucky"]
        await settled(bridge)
        assert await alice.texts(bytes(dm.id())) == ["try me", "third time lucky"]
        starts = flaky.events("start")
        assert [s["attempt"] for s in starts] == [1, 2, 3]
        assert len({s["turnId"] for s in starts}) == 1


async def test_a_poison_message_is_parked_and_never_wedges_its_conversation(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    poisoned = agent(
        """\
        if turn["messages"][-1]["text"] == "poison":
            sys.exit(3)
        note("end")
        print("fine: " + turn["messages"][-1]["text"])
        """
    )
    options = [*FAST, "--max-attempts", "2"]
    async with BridgeProcess(home, devnet, poisoned.argv, options) as bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "poison")
        await accept(bridge, dm)
        await until(lambda: parked(home))
        await alice.send(dm, "after")
        assert await texts_when(alice, dm, 3) == ["poison", "after", "fine: after"]
        (record,) = await parked(home)
        assert record["attempts"] == 2 and record["reason"] == "exit 3"
        assert record["conversationId"] == bytes(dm.id()).hex()
        assert [s["texts"] for s in poisoned.events("start")] == [["poison"], ["poison"], ["after"]]


@pytest.mark.parametrize("kill", ["as_it_starts", "after_its_context_ack"])
async def test_kill_9_in_the_middle_of_a_turn_runs_it_again_and_replies_once(
    kill: str, home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    # A DM turn's messages are acknowledged on the context consumer as its command
    # starts: the bridge is killed as the command starts, or once that ack has
    # committed; either way the turn is unanswered and unacknowledged for the bridge.
    stuck_once = agent(_STUCK_ONCE)
    bridge = BridgeProcess(home, devnet, stuck_once.argv, FAST)
    async with bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "question")
        await accept(bridge, dm)
        (first,) = await until(lambda: now(stuck_once.events("start")))
        if kill == "after_its_context_ack":
            await until(lambda: context_pending(bridge, 0))
        bridge.kill9()
        assert alive(first["pid"])  # the command outlives the bridge...
        await _restart_then_each_turn_answers_once(bridge, alice, dm, stuck_once, answered_on=2)
        await until(lambda: now(not alive(first["pid"])))  # ...until the bridge restarts
        starts = stuck_once.events("start")
        assert [s["attempt"] for s in starts] == [1, 2, 1]
        assert starts[0]["turnId"] == starts[1]["turnId"]


async def test_a_crash_right_after_the_acknowledging_reply_neither_reruns_nor_loses_the_turn(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    regenerating = agent(
        """\
        note("end")
        print("answer number %d" % turn["attempt"])
        """
    )
    crash = {"CONE_BRIDGE_TEST_CRASH": "after-reply"}
    bridge = BridgeProcess(home, devnet, regenerating.argv, FAST, extra_env=crash)
    async with bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "question")
        await accept(bridge, dm)
        proc = bridge.proc
        assert proc is not None
        await until(lambda: now(proc.poll() is not None))
        assert proc.returncode == 70  # the hook: replied and acknowledged, journal not told
        del bridge.env["CONE_BRIDGE_TEST_CRASH"]
        # The turn does not run again (the journal's entry for it is found stale and
        # dropped when the next message comes).
        await _restart_then_each_turn_answers_once(bridge, alice, dm, regenerating)


async def test_a_crash_between_a_turns_replies_runs_it_again_and_sends_each_once(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    # Two replies: the first is sent, the bridge dies before the second (which would
    # acknowledge the turn). The turn runs again; the first key is deduplicated.
    two_parts = agent(
        """\
        note("end")
        n = turn["attempt"]
        print(json.dumps({"replies": [{"text": "part a of %d" % n}, {"text": "part b of %d" % n}]}))
        """
    )
    crash = {"CONE_BRIDGE_TEST_CRASH": "between-replies"}
    bridge = BridgeProcess(home, devnet, two_parts.argv, FAST, extra_env=crash)
    async with bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "question")
        await accept(bridge, dm)
        proc = bridge.proc
        assert proc is not None
        await until(lambda: now(proc.poll() is not None))
        assert proc.returncode == 70  # the hook: one reply sent, the turn unacknowledged
        del bridge.env["CONE_BRIDGE_TEST_CRASH"]
        await bridge.restart()
        await until(lambda: now(len(two_parts.events("end")) == 2))
        await settled(bridge)
        texts = await alice.texts(bytes(dm.id()))
        assert texts == ["question", "part a of 1", "part b of 2"]


async def test_a_kill9_right_after_the_turns_reply_commits_keeps_the_reply_and_the_ack(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    # The bridge hosts the core: the failpoint stops its store's thread right after
    # the first claim's transaction (the turn's Reply with its acknowledgement), and
    # the whole process is killed there.
    regenerating = agent(
        """\
        note("end")
        print("answer number %d" % turn["attempt"])
        """
    )
    marker = home.parent / f"{home.name}.failpoint"
    env = {
        "CONE_FAILPOINT": "group_commit",
        "CONE_FAILPOINT_GROUP": "1",
        "CONE_FAILPOINT_FILE": str(marker),
    }
    bridge = BridgeProcess(home, devnet, regenerating.argv, FAST, extra_env=env)
    async with bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "question")
        await accept(bridge, dm)
        await until(lambda: now(marker.exists()))
        bridge.kill9()
        for name in env:
            bridge.env.pop(name)
        # Acknowledged, and the outbox delivers the reply.
        await _restart_then_each_turn_answers_once(bridge, alice, dm, regenerating)


async def test_stopping_the_bridge_mid_turn_stops_the_command_and_costs_no_attempt(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    stuck_once = agent(
        """\
        marker = os.path.join(os.path.dirname(LOG), "ran-once")
        if not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(3600)  # stopped with the bridge
        note("end")
        print("attempt %d" % turn["attempt"])
        """
    )
    bridge = BridgeProcess(home, devnet, stuck_once.argv, FAST)
    async with bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "slow one")
        await accept(bridge, dm)
        (first,) = await until(lambda: now(stuck_once.events("start")))
        assert await bridge.stop() == 0  # SIGTERM
        assert not alive(first["pid"])
        await bridge.restart()
        assert await texts_when(alice, dm, 2) == ["slow one", "attempt 1"]


async def test_a_reply_the_core_refuses_parks_the_turn(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    verbose = agent('print("x" * (600 * 1024))\n')  # over the 512 KiB text limit
    async with BridgeProcess(home, devnet, verbose.argv, FAST) as bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "tell me everything")
        await accept(bridge, dm)
        (record,) = await until(lambda: parked(home))
        assert record["reason"].startswith("reply refused: invalid_argument")
        await settled(bridge)
        assert await alice.texts(bytes(dm.id())) == ["tell me everything"]


async def test_a_reply_too_large_parks_at_once_instead_of_retrying_forever(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    # 65 MiB: over the gRPC message limit, which used to pass for XMTP's rate limit and
    # was retried forever. The content checks now refuse it first (text is at most
    # 512 KiB); either refusal is deterministic, so the turn parks at once.
    # (tests/core/test_error_classes.py checks the gRPC limit's classification.)
    huge = agent(
        """\
        note("end")
        if turn["messages"][-1]["text"] == "everything":
            sys.stdout.write("x" * (65 * 1024 * 1024))
        else:
            print("fine: " + turn["messages"][-1]["text"])
        """
    )
    async with BridgeProcess(home, devnet, huge.argv, FAST) as bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "everything")
        await accept(bridge, dm)
        (record,) = await until(lambda: parked(home))
        assert record["attempts"] == 1
        assert record["reason"].startswith("reply refused: invalid_argument: text must be at most")
        await alice.send(dm, "after")
        assert await texts_when(alice, dm, 3) == ["everything", "after", "fine: after"]
        await settled(bridge)
        assert [s["texts"] for s in huge.events("start")] == [["everything"], ["after"]]
        assert bridge.proc is not None and bridge.proc.poll() is None  # still serving
        assert "retrying" not in bridge.stderr()
