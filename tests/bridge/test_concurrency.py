"""Turns in different conversations overlap; turns in one conversation never do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conepb.v1 import cone_pb2 as pb
from support.peers import Peer
from support.waiting import until

from ._helpers import accept, dm_to, settled, texts_when
from .conftest import Agent, BridgeProcess

# "a1" holds its turn until b1's turn has started (so both run at once) and the test
# creates `release`; every other turn ends at once.
HOLDING = """\
here = os.path.dirname(LOG)
if turn["messages"][0]["text"] == "a1":
    deadline = time.time() + 30
    while time.time() < deadline:
        started = open(LOG).read()
        if '"b1"' in started and os.path.exists(os.path.join(here, "release")):
            break
        time.sleep(0.02)
note("end")
print("done: " + ", ".join(m["text"] for m in turn["messages"]))
"""


async def test_conversations_run_concurrently_and_each_one_sequentially(
    home: Path, devnet: str, alice: Peer, bob: Peer, agent: Callable[[str], Agent]
) -> None:
    holding = agent(HOLDING)
    async with BridgeProcess(home, devnet, holding.argv) as bridge:
        dm_a, dm_b = await dm_to(alice, bridge), await dm_to(bob, bridge)
        await alice.send(dm_a, "a1")
        await bob.send(dm_b, "hello")
        await accept(bridge, dm_a)
        await accept(bridge, dm_b)
        await until(lambda: _started(holding, "a1"))
        await alice.send(dm_a, "a2")  # arrives while a1's turn runs
        await texts_when(bob, dm_b, 2)  # bob's first turn ran beside a1 and ended
        await bob.send(dm_b, "b1")
        await until(lambda: _started(holding, "b1"))
        await until(lambda: _in_inbox(bridge, "a2"))
        await until(lambda: _ended(holding, "b1"))  # the poll restarted with a1 excluded
        assert not await _started(holding, "a2")
        (holding.dir / "release").touch()
        texts = await texts_when(alice, dm_a, 4)
        assert texts == ["a1", "a2", "done: a1", "done: a2"]
        await settled(bridge)
        spans = {e["texts"][0]: e for e in holding.events("start")}
        ends = {e["texts"][0]: e for e in holding.events("end")}
        assert spans["b1"]["t"] < ends["a1"]["t"]  # b1 ran while a1 was running
        assert spans["a2"]["t"] >= ends["a1"]["t"]  # a2 waited for a1


async def _started(agent: Agent, text: str) -> bool:
    return any(e["texts"][0] == text for e in agent.events("start"))


async def _ended(agent: Agent, text: str) -> bool:
    return any(e["texts"][0] == text for e in agent.events("end"))


async def _in_inbox(bridge: BridgeProcess, text: str) -> bool:
    """Whether the message reached the bridge's inbox (read as another consumer)."""
    batch = await bridge.client.call(
        "Receive", pb.ReceiveRequest(consumer="observer", limit=1000, wait_ms=0)
    )
    return any(m.text == text for m in batch.messages)
