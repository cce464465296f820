"""Twenty-four messages of 1,000,000 bytes pending: gRPC, JSON-RPC (`cone serve`) and
the bridge each receive all of them, in batches bounded by bytes, none lost or repeated.

Before receive batches had a byte budget, a `receive` of 100 of them (72 then) was
over gRPC's 64 MiB and failed with RESOURCE_EXHAUSTED; the bridge retried it forever.
Twenty-four are 24 MB: over gRPC's default 4 MiB and JSON-RPC's 16 MiB answer in
one batch, so every batch below that bound is the budget at work.

The messages come from four peers, 6 each: libxmtp fetches a conversation 100
messages a page and refuses a page over 25 MiB, so more than 25 unsynced messages of
1 MB in one conversation cannot be synced at all (neither from the devnet, which pages
as the node does, nor, presumably, from the network).
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

import pytest
from facades._serve import ServeProcess

from cone import limits
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import until

from .conftest import BridgeProcess

SENDERS = 4
EACH = 6
COUNT = SENDERS * EACH
SIZE = 1_000_000  # within XMTP's limit, and within cone's stored-message cap
#: Seconds for the whole test's waits: 70 MB pass through MLS twice on a shared machine.
WAIT_S = 240.0

# An agent that logs the ids and sizes of its turn (not the megabytes of text).
_AGENT = """\
import json, os, sys
turn = json.load(sys.stdin)
line = json.dumps([[m["messageId"], len(m.get("text") or "")] for m in turn["messages"]])
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
os.write(fd, (line + "\\n").encode())
os.close(fd)
"""


def _text(i: int) -> str:
    return f"{i:04d}:" + "x" * (SIZE - 5)


async def _sending(peer: Peer, conversation: object, first: int) -> None:
    for i in range(first, first + EACH):
        await peer.send(conversation, _text(i))


async def _connect(daemon: DaemonProcess, peer: Peer) -> object:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
    await peer.sync()
    return peer.conversation(bytes.fromhex(contact.conversation_id))


@pytest.mark.slow
async def test_large_messages_come_through_grpc_jsonrpc_and_the_bridge_in_bounded_batches(
    home: Path, devnet: str, tmp_path: Path
) -> None:
    senders = [await Peer.create(devnet, tmp_path, f"sender{n}") for n in range(SENDERS)]
    control = await Peer.create(devnet, tmp_path, "control")
    async with DaemonProcess(home, devnet) as daemon:
        dms = [await _connect(daemon, peer) for peer in senders]
        small = await _connect(daemon, control)
        await asyncio.gather(
            *(
                _sending(peer, dm, n * EACH)
                for n, (peer, dm) in enumerate(zip(senders, dms, strict=True))
            )
        )
        await control.send(small, "the control peer's small message")

        async def ingested() -> bool:
            status = await daemon.client.call("Status", pb.StatusRequest())
            return bool(status.inbox_messages >= COUNT + 1)

        await until(ingested, WAIT_S)
        expected = {_text(i) for i in range(COUNT)} | {"the control peer's small message"}

        # gRPC: each batch within the budget (one message alone when it is larger).
        seen: dict[str, str] = {}
        batches = 0
        while True:
            batch = await daemon.client.receive(consumer="grpc", limit=100)
            if not batch.messages:
                break
            batches += 1
            assert batch.ByteSize() < 4 * 1024 * 1024  # gRPC's default receive limit
            assert len(batch.messages) == 1 or batch.ByteSize() <= limits.RECEIVE_BATCH_BYTES
            for m in batch.messages:
                assert m.message_id not in seen  # acknowledged ones never come again
                seen[m.message_id] = m.text
            await daemon.client.ack([m.message_id for m in batch.messages], consumer="grpc")
        assert set(seen.values()) == expected and len(seen) == COUNT + 1
        assert batches >= COUNT // 2

        # JSON-RPC through `cone serve` (relaying to the daemon): the same, as lines.
        async with ServeProcess(home, devnet) as serve:
            got: dict[str, str] = {}
            while True:
                rid = serve.request("receive", {"consumer": "jsonrpc", "limit": 100})
                answer = await serve.answer_to(rid, WAIT_S)
                line = json.dumps(answer, separators=(",", ":"))
                assert len(line) < 16 * 1024 * 1024
                messages = answer["result"]["messages"]
                if not messages:
                    break
                for m in messages:
                    assert m["messageId"] not in got
                    got[m["messageId"]] = m["text"]
                await serve.call(
                    "ack", {"consumer": "jsonrpc", "messageIds": [m["messageId"] for m in messages]}
                )
            assert got == seen

        # The bridge (relaying to the daemon): one turn per batch's conversation, all acked.
        script = tmp_path / "agent.py"
        script.write_text(textwrap.dedent(_AGENT))
        log = tmp_path / "turns.log"
        argv = [sys.executable, str(script), str(log)]
        async with BridgeProcess(home, devnet, argv) as bridge:

            async def drained() -> bool:
                if not log.exists() or log.read_text().count('"') < 2 * (COUNT + 1):
                    return False
                return await bridge.pending() == 0

            await until(drained, WAIT_S)
        turns = [json.loads(line) for line in log.read_text().splitlines()]
        handed = [mid for turn in turns for mid, _ in turn]
        assert sorted(handed) == sorted(seen)  # each message in exactly one turn
        sizes = {mid: n for turn in turns for mid, n in turn}
        assert sorted(sizes.values()) == sorted(len(t) for t in seen.values())
