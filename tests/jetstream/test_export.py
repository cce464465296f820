"""The inbound export to a real JetStream: each accepted message once, in order per
conversation, with its cone id as `Nats-Msg-Id`; requests only after accept."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import nats
from nats.aio.client import Client

from cone.jetstream.subjects import Layout, partition_of
from conepb.v1 import cone_pb2 as pb
from support.cli import cone_cli
from support.http_daemon import HttpDaemon
from support.nats import NatsServer
from support.peers import Peer
from support.waiting import until

from ._worker import stored, take
from .conftest import Bridged, bridged_daemon, jetstream_env


def _layout(b: Bridged) -> Layout:
    return Layout("cone", b.inbox_id, 4)


async def _export_pending(b: Bridged) -> int:
    status = await b.daemon.status()
    return sum(c.pending for c in status.consumers if c.consumer == "jetstream")


async def test_accepted_messages_are_exported_once_in_order(bridged: Bridged, nc: Client) -> None:
    layout = _layout(bridged)
    await bridged.send("one", "two", "three")
    got = await take(nc, layout, 3)
    assert [e.body["text"] for e in got] == ["one", "two", "three"]
    part = partition_of(bridged.conversation_id, 4)
    assert {e.subject for e in got} == {
        f"cone.{bridged.inbox_id}.in.{part}.{bridged.conversation_id}"
    }
    # The cone message id is JetStream's de-duplication id and the body's messageId.
    assert [e.msg_id for e in got] == [e.body["messageId"] for e in got]
    assert all(e.body["conversationId"] == bridged.conversation_id for e in got)
    # The cursor moved: nothing pending for the export's consumer.
    await until(lambda: _zero(bridged))
    assert await stored(nc, layout) == 0  # a work queue: the worker's acks removed them


async def _zero(b: Bridged) -> bool:
    return await _export_pending(b) == 0


async def test_status_says_jetstream_is_reachable_and_the_backlog_goes_out_when_back(
    bridged: Bridged, nats_server: NatsServer
) -> None:
    async def up() -> bool:
        return (await bridged.daemon.status()).jetstream.reachable

    await until(up)
    status = await bridged.daemon.status()
    assert status.jetstream.servers == nats_server.shown
    assert status.jetstream.consumer == "jetstream"
    home = str(bridged.daemon.home)
    shown = await cone_cli(["status", "--home", home, "--json"])
    assert shown.json()["jetstream"]["reachable"] is True
    text = await cone_cli(["status", "--home", home])
    assert f"jetstream   {nats_server.shown} reachable; export 0 behind" in text.out
    # JetStream down: status says so; the core goes on ingesting into its own inbox.
    await nats_server.stop()

    async def down() -> bool:
        return not (await bridged.daemon.status()).jetstream.reachable

    await until(down)
    await bridged.send("while down")

    async def behind() -> bool:
        return await _export_pending(bridged) == 1

    await until(behind)
    await bridged.send("still down")
    # Back on the same port and store: the backlog goes out, in order.
    await nats_server.start()
    await nats_server.ready()
    nc = await nats.connect(nats_server.url)
    try:
        got = await take(nc, _layout(bridged), 2)
    finally:
        await nc.close()
    assert [e.body["text"] for e in got] == ["while down", "still down"]
    await until(up)


async def test_a_request_is_exported_only_after_accept(
    home: Path, devnet: str, alice: Peer, tmp_path: Path, nats_server: NatsServer, nc: Client
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    daemon, b = await bridged_daemon(home, devnet, alice, jetstream_env(nats_server.url))
    try:
        layout = _layout(b)
        dm = await daemon.dm_from(bob)
        await bob.send(dm, "may I?")
        cid = dm.id().hex()

        async def held() -> bool:
            await daemon.client.call("Sync", pb.SyncRequest())
            requests = await daemon.client.call("Requests", pb.RequestsRequest())
            return any(r.conversation_id == cid for r in requests.requests)

        await until(held)
        await b.send("meanwhile")
        got = await take(nc, layout, 1)
        assert [e.body["text"] for e in got] == ["meanwhile"]
        assert await stored(nc, layout) == 0  # the request's message was not exported
        await bob.send(dm, "please")
        await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=cid))
        got = await take(nc, layout, 2)
        assert [e.body["text"] for e in got] == ["may I?", "please"]
        assert {e.body["conversationId"] for e in got} == {cid}
    finally:
        await daemon.__aexit__(None, None, None)


async def test_credentials_in_the_url_work_and_are_never_shown(
    home: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    password = "s3cret-pw-never-shown"
    async with NatsServer(tmp_path / "nats", user="cone", password=password) as server:
        daemon, b = await bridged_daemon(home, devnet, alice, jetstream_env(server.url))
        try:
            await b.send("authenticated")
            nc = await nats.connect(server.url)
            try:
                got = await take(nc, _layout(b), 1)
            finally:
                await nc.close()
            assert [e.body["text"] for e in got] == ["authenticated"]
            status = await daemon.status()
            assert status.jetstream.servers == server.shown
            shown = await cone_cli(["status", "--home", str(home), "--json"])
            assert password not in shown.out + shown.err
            await daemon.stop()
            assert password not in daemon.stderr()
        finally:
            await daemon.__aexit__(None, None, None)


async def test_metrics_say_jetstream_is_up_and_the_export_lag(
    home: Path, devnet: str, nats_server: NatsServer
) -> None:
    daemon = HttpDaemon(home, devnet)
    daemon.env.update(jetstream_env(nats_server.url))
    async with daemon:

        async def up() -> bool:
            return (await daemon.status()).jetstream.reachable

        await until(up)
        async with aiohttp.ClientSession() as session:

            async def scraped() -> str | None:
                async with session.get(daemon.url + "metrics", headers=daemon.auth) as r:
                    text = await r.text()
                return text if 'cone_consumer_pending{consumer="jetstream"}' in text else None

            text = await until(scraped)
        assert "cone_jetstream_up 1.0" in text
        assert 'cone_consumer_pending{consumer="jetstream"} 0.0' in text
