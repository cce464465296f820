"""Chaos: sends under random `kill -9` of the daemon; the peer gets each key exactly once.

The sends go a few at a time into one conversation, as an agent answering several
messages at once does.

CI runs the bounded form (100 sends, at least 20 kills: each kill lands among
a few sends, as in the long form). The soak form is
`CONE_SOAK=1 pytest -m soak tests/core/test_send_chaos.py` (1,000 sends, 100 kills).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter

import pytest

from cone.core import content
from cone.errors import ConeError, Unavailable
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import until

SOAK = os.environ.get("CONE_SOAK") == "1"
SENDS, KILLS = (1000, 100) if SOAK else (100, 20)
AT_ONCE = 4


async def _send_until_answered(
    holder: dict[str, DaemonProcess], to: str, key: str, text: str
) -> pb.SendResponse:
    while True:
        try:
            return await holder["d"].client.call(
                "Send", pb.SendRequest(to=to, text=text, key=key), timeout=30
            )
        except (Unavailable, ConeError, AssertionError):
            await asyncio.sleep(0.05)  # the daemon is down or restarting; retry the same key


@pytest.mark.soak
@pytest.mark.slow
async def test_every_key_arrives_exactly_once_with_its_first_payload(
    daemon: DaemonProcess, alice: Peer
) -> None:
    rng = random.Random(7)
    holder = {"d": daemon}
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    done = asyncio.Event()
    kills = 0

    async def killer() -> None:
        nonlocal kills
        while not done.is_set() or kills < KILLS:
            await asyncio.sleep(rng.uniform(0.02, 0.4))
            holder["d"].kill9()
            kills += 1
            await holder["d"].restart()

    killing = asyncio.create_task(killer())
    keys = [f"chaos-{i:04d}" for i in range(SENDS)]
    first_ids: dict[str, str] = {}

    async def send(key: str) -> None:
        r = await _send_until_answered(
            holder, contact.conversation_id, key, f"first payload of {key}"
        )
        first_ids[key] = r.message_id

    # A few at once: kills land while several of the conversation's messages are
    # queued in libxmtp and published in one round (cone/engine/_rounds.py).
    for at in range(0, SENDS, AT_ONCE):
        await asyncio.gather(*(send(key) for key in keys[at : at + AT_ONCE]))
    done.set()
    await killing
    assert kills >= KILLS

    # After a final restart, every key is sent again with other text: all deduplicated.
    holder["d"].kill9()
    await holder["d"].restart()
    for key in keys:
        r = await _send_until_answered(holder, contact.conversation_id, key, "regenerated")
        assert r.deduplicated and r.message_id == first_ids[key]

    async def settled() -> bool:
        status = await holder["d"].client.call("Status", pb.StatusRequest())
        return not status.outbox

    await until(settled, timeout=120)
    received = [
        content.decode(m.content)
        for m in await alice.received(bytes.fromhex(contact.conversation_id))
    ]
    per_key = Counter(d.send_key for d in received)
    assert set(per_key) == set(keys)
    assert [k for k, n in per_key.items() if n != 1] == []
    assert all(d.text == f"first payload of {d.send_key}" for d in received)
