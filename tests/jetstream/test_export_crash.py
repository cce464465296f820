"""kill -9 of the daemon between JetStream's ack of an export and cone's cursor: after
the restart the batch is published again and JetStream drops it by its id, so each
message is in the stream once."""

from __future__ import annotations

from pathlib import Path

from nats.aio.client import Client

from cone.jetstream.export import EXPORTED_FAILPOINT
from cone.jetstream.subjects import Layout
from support.nats import NatsServer
from support.peers import Peer
from support.waiting import until

from ._worker import stored, take
from .conftest import bridged_daemon, jetstream_env


async def test_kill9_between_jetstream_ack_and_cursor_exports_once(
    home: Path, devnet: str, alice: Peer, tmp_path: Path, nats_server: NatsServer, nc: Client
) -> None:
    marker = tmp_path / "reached"
    env = jetstream_env(
        nats_server.url, CONE_FAILPOINT=EXPORTED_FAILPOINT, CONE_FAILPOINT_FILE=str(marker)
    )
    daemon, b = await bridged_daemon(home, devnet, alice, env)
    try:
        layout = Layout("cone", b.inbox_id, 4)
        await b.send("first", "second")

        async def at_failpoint() -> bool:
            return marker.exists()

        await until(at_failpoint)
        # JetStream holds the batch; cone's cursor has not moved.
        held = await stored(nc, layout)
        assert held >= 1
        daemon.kill9()
        for name in ("CONE_FAILPOINT", "CONE_FAILPOINT_FILE"):
            daemon.env.pop(name)
        await daemon.restart()
        got = await take(nc, layout, 2)
        assert [e.body["text"] for e in got] == ["first", "second"]

        async def cursor_moved() -> bool:
            status = await daemon.status()
            return all(c.pending == 0 for c in status.consumers if c.consumer == "jetstream")

        await until(cursor_moved)
        assert await stored(nc, layout) == 0  # nothing else came: no duplicate
        info = await nc.jetstream().stream_info(layout.stream("in"))
        assert info.state.last_seq == 2  # two messages ever stored, the repeat dropped
    finally:
        await daemon.__aexit__(None, None, None)
