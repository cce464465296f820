"""Exactly one answer per message across repeated `kill -9` of the bridge."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.peers import Peer
from support.waiting import until

from ._helpers import accept, dm_to, settled
from .conftest import Agent, BridgeProcess

# Answers every message of the turn in one reply; dawdles a little so kills land mid-turn.
COVERING = """\
import random
time.sleep(random.uniform(0, 0.05))  # the input: an agent of uneven speed
note("end")
print("re: " + ",".join(m["text"] for m in turn["messages"]))
"""
WAVES = 10


def _covered(texts: list[str]) -> list[str]:
    """The messages the replies among `texts` answer, with repeats."""
    out: list[str] = []
    for text in texts:
        if text.startswith("re: "):
            out.extend(text[4:].split(","))
    return out


async def test_every_message_is_answered_exactly_once_across_kill_9s(
    home: Path, devnet: str, tmp_path: Path, agent: Callable[[str], Agent]
) -> None:
    covering = agent(COVERING)
    peers = [await Peer.create(devnet, tmp_path, f"p{i}") for i in range(3)]
    bridge = BridgeProcess(home, devnet, covering.argv, ["--backoff", "0.05"])
    async with bridge:
        pairs: list[tuple[Peer, Any]] = [(p, await dm_to(p, bridge)) for p in peers]
        for i, (peer, dm) in enumerate(pairs):
            await peer.send(dm, f"p{i}-0")
            await accept(bridge, dm)

        async def answered() -> int:
            return sum([len(_covered(await p.texts(bytes(d.id())))) for p, d in pairs])

        for wave in range(1, WAVES):
            before = await answered()
            await asyncio.gather(*(p.send(d, f"p{i}-{wave}") for i, (p, d) in enumerate(pairs)))
            if wave % 2:

                async def progressed(before: int = before) -> bool:
                    return await answered() > before

                await until(progressed)
                bridge.kill9()
                await bridge.restart()

        async def all_answered() -> bool:
            return await answered() >= len(peers) * WAVES

        await until(all_answered)
        await settled(bridge)
        for i, (peer, dm) in enumerate(pairs):
            covered = _covered(await peer.texts(bytes(dm.id())))
            assert sorted(covered) == sorted(f"p{i}-{w}" for w in range(WAVES)), covered
