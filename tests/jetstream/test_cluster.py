"""A 3-node JetStream cluster with every stream replicated 3 ways: a node killed with
kill -9 during a stream of messages, and export and replies go on; then the whole
cluster down, and the backlog goes out in order when it is back."""

from __future__ import annotations

import json
from pathlib import Path

import nats
import pytest

from cone.jetstream.subjects import Layout
from support.nats import NatsCluster
from support.peers import Peer
from support.waiting import until

from ._worker import outcome, take
from .conftest import bridged_daemon, jetstream_env

pytestmark = pytest.mark.slow


async def test_export_and_replies_go_on_when_a_node_dies(
    home: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    async with NatsCluster(tmp_path / "cluster", 3) as cluster:
        env = jetstream_env(cluster.url, CONE_JETSTREAM_REPLICAS="3")
        daemon, b = await bridged_daemon(home, devnet, alice, env)
        try:
            layout = Layout("cone", b.inbox_id, 4)
            probe = await nats.connect(servers=[n.url for n in cluster.nodes])
            try:
                await b.send("before")
                assert [e.body["text"] for e in await take(probe, layout, 1)] == ["before"]
                info = await probe.jetstream().stream_info(layout.stream("in"))
            finally:
                await probe.close()
            assert info.config.num_replicas == 3
            assert info.cluster is not None
            # The inbound stream's leader dies; the worker reaches the nodes that stay.
            leader = next(n for n in cluster.nodes if n.name == info.cluster.leader)
            rest = [n for n in cluster.nodes if n is not leader]
            nc = await nats.connect(servers=[n.url for n in rest])
            try:
                leader.kill9()
                await b.send("during", "after")
                got = await take(nc, layout, 2)
                assert [e.body["text"] for e in got] == ["during", "after"]
                reply = {"conversationId": b.conversation_id, "text": "still here"}
                await nc.jetstream().publish(
                    layout.out("reply"), json.dumps(reply).encode(), headers={"Nats-Msg-Id": "c1"}
                )
                assert (await outcome(nc, layout, "c1"))["ok"] is True

                async def delivered() -> bool:
                    texts = await b.peer.texts(bytes.fromhex(b.conversation_id))
                    return "still here" in texts

                await until(delivered)
            finally:
                await nc.close()
            # The whole cluster down: cone ingests on; back, the backlog goes out in order.
            for node in rest:
                await node.stop()
            await b.send("dark 1", "dark 2", "dark 3")

            async def ingested() -> bool:
                status = await daemon.status()
                return sum(c.pending for c in status.consumers if c.consumer == "jetstream") == 3

            await until(ingested)
            for node in cluster.nodes:
                await node.start()
            for node in cluster.nodes:
                await node.ready()
            nc = await nats.connect(servers=[n.url for n in cluster.nodes])
            try:
                got = await take(nc, layout, 3)
            finally:
                await nc.close()
            assert [e.body["text"] for e in got] == ["dark 1", "dark 2", "dark 3"]
        finally:
            await daemon.__aexit__(None, None, None)
