"""A stranger learns nothing by sending: remote attachments are fetched only for
accepted conversations and never for blocked inboxes (groups included), and what a
request holds is fetched once it is accepted (docs/security.md).

A real listener on loopback records every request it sees. Two Node SDK identities
on the devnet: a friend, accepted, whose attachments prove the fetcher has run since
the stranger's message was stored, and the stranger, whose attachments point at
paths the listener must never see.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.node_peer import NodePeer, remote_reference
from support.waiting import accept_request, until

pytestmark = pytest.mark.timeout(240)


@asynccontextmanager
async def _listener(bodies: dict[str, bytes], seen: list[str]) -> AsyncIterator[str]:
    """An aiohttp server on 127.0.0.1 that records every request's path."""

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.path)
        body = bodies.get(request.path)
        return web.Response(body=body) if body is not None else web.Response(status=404)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def _attachment(sdk: NodePeer, bodies: dict[str, bytes], url: str) -> dict[str, Any]:
    """A remote attachment at `url` (its payload served at that path)."""
    enc = await sdk.encrypted("f.txt", "text/plain", b"hi")
    bodies["/" + url.split("/", 3)[3]] = enc["payload"]
    return remote_reference(enc, url)


async def _pending_requests(daemon: DaemonProcess) -> dict[str, int]:
    await daemon.client.call("Sync", pb.SyncRequest())
    answer = await daemon.client.call("Requests", pb.RequestsRequest())
    return {r.conversation_id: r.pending_messages for r in answer.requests}


@pytest.fixture
async def local_daemon(home: Path, devnet: str) -> AsyncIterator[DaemonProcess]:
    async with DaemonProcess(home, devnet, {"CONE_ATTACHMENT_ALLOW_LOCAL": "1"}) as d:
        yield d


async def test_a_stranger_or_a_blocked_peer_makes_cone_fetch_nothing(
    local_daemon: DaemonProcess, devnet: str, tmp_path: Path
) -> None:
    daemon = local_daemon
    bodies: dict[str, bytes] = {}
    seen: list[str] = []
    me = (await daemon.client.identity()).inbox_id
    (tmp_path / "friend").mkdir()
    (tmp_path / "stranger").mkdir()
    async with (
        _listener(bodies, seen) as base,
        NodePeer.start(devnet, tmp_path / "friend") as friend,
        NodePeer.start(devnet, tmp_path / "stranger") as stranger,
    ):
        friends = await friend.dm(me)
        await friend.send(friends, "text", "hello")
        await accept_request(daemon.client, friends)

        async def probe(name: str) -> None:
            """The friend's attachment, fetched: the fetcher ran after what came before."""
            ref = await _attachment(friend, bodies, f"{base}/{name}")
            await friend.send(friends, "remoteAttachment", ref)
            await until(lambda: _true(f"/{name}" in seen), timeout=60)

        # A stranger's request: held, and its attachment never fetched.
        dm = await stranger.dm(me)
        ref = await _attachment(stranger, bodies, f"{base}/stranger")
        await stranger.send(dm, "remoteAttachment", ref)
        await until(lambda: _held(daemon, dm), timeout=60)
        await probe("probe1")
        assert "/stranger" not in seen

        # Blocked: neither its DM nor its messages in an accepted group are fetched.
        await daemon.client.call("Block", pb.BlockRequest(conversation_id=dm))
        group = await friend.group(me, stranger.inbox_id)
        await friend.send(group, "text", "welcome")
        await accept_request(daemon.client, group)
        for conversation, name in ((dm, "blocked-dm"), (group, "blocked-in-group")):
            ref = await _attachment(stranger, bodies, f"{base}/{name}")
            await stranger.send(conversation, "remoteAttachment", ref)
        await probe("probe2")
        assert [p for p in seen if not p.startswith("/probe")] == []

        # Unblocked it is a request again; once accepted, what it holds is fetched.
        await daemon.client.call("Unblock", pb.UnblockRequest(conversation_id=dm))
        await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=dm))
        await until(
            lambda: _true({"/stranger", "/blocked-dm", "/blocked-in-group"} <= set(seen)),
            timeout=60,
        )


async def _true(value: bool) -> bool:
    return value


async def _held(daemon: DaemonProcess, conversation_id: str) -> bool:
    return (await _pending_requests(daemon)).get(conversation_id, 0) >= 1
