"""Helpers shared by the bridge tests."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.engine import _client
from conepb.v1 import cone_pb2 as pb
from support.peers import Peer
from support.waiting import until

from .conftest import BridgeProcess


async def dm_to(peer: Peer, bridge: BridgeProcess) -> Any:
    """The peer's DM with the bridge's identity."""
    ident = await bridge.client.identity()
    return await peer.client.conversations().find_or_create_dm_by_identity(
        _client.identifier(ident.address),
        ffi.FfiCreateDmOptions(message_disappearing_settings=None),
    )


async def group_with_bridge(peer: Peer, bridge: BridgeProcess) -> Any:
    """A group the peer creates with the bridge's identity in it."""
    ident = await bridge.client.identity()
    opts = ffi.FfiCreateGroupOptions(
        permissions=None, group_name=None, group_image_url_square=None,
        group_description=None, custom_permission_policy_set=None,
        message_disappearing_settings=None, app_data=None,
    )  # fmt: skip
    return await peer.client.conversations().create_group([ident.inbox_id], opts)


async def accept(bridge: BridgeProcess, conversation: Any) -> None:
    """Accept the conversation's request through the bridge's socket (a relayed call)."""
    cid = bytes(conversation.id()).hex()

    async def requested() -> bool:
        reqs = await bridge.client.call("Requests", pb.RequestsRequest())
        return any(r.conversation_id == cid for r in reqs.requests)

    await until(requested)
    await bridge.client.call("Accept", pb.AcceptRequest(conversation_id=cid))


async def texts_when(peer: Peer, conversation: Any, n: int) -> list[str]:
    """The conversation's texts once there are at least `n`."""
    cid = bytes(conversation.id())

    async def enough() -> list[str] | None:
        texts = await peer.texts(cid)
        return texts if len(texts) >= n else None

    return await until(enough)


async def settled(bridge: BridgeProcess) -> None:
    """Wait until the bridge acknowledged everything and its outbox is empty."""

    async def idle() -> bool:
        status = await bridge.client.call("Status", pb.StatusRequest())
        pending = sum(c.pending for c in status.consumers if c.consumer == "bridge")
        return pending == 0 and not status.outbox

    await until(idle)


async def parked(home: Path) -> list[dict[str, object]]:
    """What `cone bridge --parked` prints, one JSON object a line."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", "bridge", "--home", str(home), "--parked",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    return [json.loads(line) for line in out.decode().splitlines()]


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return sys.platform != "linux"


async def now(value: object) -> object:
    """`value`, awaitable (for until())."""
    return value
