"""The bridge end to end: a real `cone bridge` process, raw libxmtp peers, the devnet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from support.peers import Peer
from support.waiting import until

from ._helpers import accept, dm_to, group_with_bridge, settled, texts_when
from .conftest import Agent, BridgeProcess

ECHO = """\
note("end")
print("echo: " + " | ".join(m.get("text") or "" for m in turn["messages"]))
"""


async def test_a_dm_is_answered_once_after_its_request_is_accepted(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    echo = agent(ECHO)
    async with BridgeProcess(home, devnet, echo.argv) as bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "hello")
        await accept(bridge, dm)  # relayed to the bridge's socket
        assert await texts_when(alice, dm, 2) == ["hello", "echo: hello"]
        await settled(bridge)
        assert await alice.texts(bytes(dm.id())) == ["hello", "echo: hello"]
        (start,) = echo.events("start")
        ident = await bridge.client.identity()
        env = start["env"]
        assert start["type"] == "dm" and start["attempt"] == 1
        assert env["CONE_CONVERSATION_ID"] == bytes(dm.id()).hex()
        assert env["CONE_TURN_ID"] == env["CONE_MESSAGE_IDS"] == start["turnId"]
        assert env["CONE_REPLY_KEY"] == f"reply:{start['turnId']}"
        assert env["CONE_INBOX_ID"] == ident.inbox_id
        assert env["CONE_HOME"] == str(home)


async def test_a_group_turn_starts_only_when_addressed_and_gets_the_context(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    echo = agent(ECHO)
    async with BridgeProcess(home, devnet, echo.argv, ["--alias", "bot"]) as bridge:
        group = await group_with_bridge(alice, bridge)
        await alice.send(group, "just chatting")
        await accept(bridge, group)
        await alice.send(group, "email me at x@bot please, @bots and @bot-2 are others")
        await until(lambda: _acked(bridge, 2))
        assert echo.events() == []
        await alice.send(group, "hey @Bot, sum it up")
        texts = await texts_when(alice, group, 4)
        assert texts[3] == "echo: hey @Bot, sum it up"
        await settled(bridge)
        assert len(await alice.texts(bytes(group.id()))) == 4
        (start,) = echo.events("start")
        assert start["type"] == "group"
        assert start["texts"] == ["hey @Bot, sum it up"]
        assert start["context"] == [
            "just chatting",
            "email me at x@bot please, @bots and @bot-2 are others",
        ]


async def _acked(bridge: BridgeProcess, n: int) -> bool:
    """Whether `n` messages are receivable (read as another consumer) and the bridge
    has acknowledged every one."""
    from conepb.v1 import cone_pb2 as pb

    batch = await bridge.client.call(
        "Receive", pb.ReceiveRequest(consumer="observer", limit=1000, wait_ms=0)
    )
    status = await bridge.client.call("Status", pb.StatusRequest())
    seen = {c.consumer: c.pending for c in status.consumers}
    return len(batch.messages) >= n and seen.get("bridge") == 0


async def test_held_group_context_survives_a_kill_9_of_the_bridge(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    echo = agent(ECHO)
    bridge = BridgeProcess(home, devnet, echo.argv, ["--alias", "bot"])
    async with bridge:
        group = await group_with_bridge(alice, bridge)
        await alice.send(group, "first thoughts")
        await accept(bridge, group)
        await alice.send(group, "second thoughts")
        await until(lambda: _acked(bridge, 2))  # held as context, acked for the bridge
        bridge.kill9()
        await bridge.restart()
        await alice.send(group, "@bot what did we say?")
        texts = await texts_when(alice, group, 4)
        assert texts[3] == "echo: @bot what did we say?"
        (start,) = echo.events("start")
        assert start["context"] == ["first thoughts", "second thoughts"]
