"""What requests may hold: a flood from many fresh identities is bounded, counted, and
never holds back an accepted peer (docs/guarantees.md, "What requests may hold").

A real daemon with its request budget lowered through the environment, the devnet,
and real libxmtp identities: one accepted peer and a dozen strangers.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer, plain_group_options
from support.waiting import accept_request, receive_n, until

STRANGERS = 12
EACH = 6
PER_SENDER = 4
TOTAL = 30
BUDGET = {
    "CONE_REQUEST_SENDER_MESSAGES": str(PER_SENDER),
    "CONE_REQUEST_TOTAL_MESSAGES": str(TOTAL),
}


@pytest.fixture
async def daemon(home: Path, devnet: str) -> AsyncIterator[DaemonProcess]:
    """A daemon whose requests may hold PER_SENDER messages per sender, TOTAL in all."""
    async with DaemonProcess(home, devnet, BUDGET) as d:
        yield d


async def _taken(daemon: DaemonProcess, sent: int) -> tuple[dict[str, int], int] | None:
    """(messages held per request, dropped) once `sent` messages are taken in, else None."""
    await daemon.client.call("Sync", pb.SyncRequest())
    requests = await daemon.client.call("Requests", pb.RequestsRequest())
    held = {r.conversation_id: r.pending_messages for r in requests.requests}
    dropped = (await daemon.status()).requests_dropped
    return (held, dropped) if sum(held.values()) + dropped == sent else None


async def test_a_flood_of_strangers_is_bounded_while_an_accepted_peer_flows(
    daemon: DaemonProcess, devnet: str, tmp_path: Path
) -> None:
    inbox_id = (await daemon.client.identity()).inbox_id
    alice = await Peer.create(devnet, tmp_path, "alice")
    alice_dm = await daemon.dm_from(alice)
    await alice.send(alice_dm, "alice 0")
    await accept_request(daemon.client, bytes(alice_dm.id()).hex())
    await receive_n(daemon.client, 1)

    # One sender's DM and the group it invites to share the inviter's budget.
    inviter = await Peer.create(devnet, tmp_path, "inviter")
    inviter_dm = await daemon.dm_from(inviter)
    group = await inviter.client.conversations().create_group([inbox_id], plain_group_options())
    for j in range(2):
        await inviter.send(inviter_dm, f"dm {j}")
    for j in range(3):
        await inviter.send(group, f"group {j}")
    held, dropped = await until(lambda: _taken(daemon, 5))
    assert sum(held.values()) == PER_SENDER and dropped == 1
    assert set(held) == {bytes(inviter_dm.id()).hex(), bytes(group.id()).hex()}

    strangers = await asyncio.gather(
        *(Peer.create(devnet, tmp_path, f"s{i}") for i in range(STRANGERS))
    )

    async def flood(peer: Peer) -> str:
        dm = await daemon.dm_from(peer)
        for j in range(EACH):
            await peer.send(dm, f"{peer.name} {j}")
        return bytes(dm.id()).hex()

    async def alice_talks() -> None:
        for j in range(1, 11):
            await alice.send(alice_dm, f"alice {j}")

    # The accepted peer's messages arrive while the strangers flood.
    flooding = asyncio.gather(*(flood(p) for p in strangers))
    await alice_talks()
    got = await receive_n(daemon.client, 11)
    assert [m.text for m in got] == [f"alice {j}" for j in range(11)]
    dms = await flooding

    sent = 5 + STRANGERS * EACH
    held, dropped = await until(lambda: _taken(daemon, sent))
    assert sum(held.values()) == TOTAL
    assert dropped == sent - TOTAL
    assert all(held.get(dm, 0) <= PER_SENDER for dm in dms)

    # Accept releases what was kept of a conversation, in the order it was sent.
    kept = next(dm for dm in dms if held.get(dm))
    await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=kept))
    name = strangers[dms.index(kept)].name
    released = await receive_n(daemon.client, 11 + held[kept])
    assert [m.text for m in released[11:]] == [f"{name} {j}" for j in range(held[kept])]

    # The count is in `cone status --json` and in its readable form.
    assert int(json.loads(await _status(daemon, "--json"))["requestsDropped"]) == dropped
    assert f"{dropped} message(s) dropped over the request budget" in await _status(daemon)

    # A dropped message is read: the catch-ups' reconciliation never takes it as a gap.
    synced = (await daemon.status()).last_sync_at.ToNanoseconds()

    async def caught_up_again() -> pb.StatusResponse | None:
        status = await daemon.status()
        return status if status.last_sync_at.ToNanoseconds() > synced else None

    status = await until(caught_up_again)
    assert status.ingest_healed == 0 and status.requests_dropped == dropped


async def _status(daemon: DaemonProcess, *flags: str) -> str:
    """`cone status` of the daemon's home: what it prints."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", "status", "--home", str(daemon.home), *flags,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    out, _ = await proc.communicate()
    return out.decode()
