"""The streams and consumers: created when missing, updated where JetStream allows it,
and a stream laid out otherwise refused with a clear error (the core runs on)."""

from __future__ import annotations

from pathlib import Path

from nats.aio.client import Client
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from cone.jetstream.subjects import Layout
from support.daemons import DaemonProcess
from support.nats import NatsServer
from support.waiting import until

from .conftest import jetstream_env


async def test_a_changed_ack_wait_updates_the_consumers(
    home: Path, devnet: str, nats_server: NatsServer, nc: Client
) -> None:
    daemon = DaemonProcess(home, devnet, extra_env=jetstream_env(nats_server.url))
    async with daemon:
        inbox = (await daemon.client.identity()).inbox_id
        layout = Layout("cone", inbox, 4)
        js = nc.jetstream()

        async def ack_wait() -> float | None:
            try:
                info = await js.consumer_info(layout.stream("in"), "in-0")
            except NotFoundError:  # not there yet
                return None
            return info.config.ack_wait

        assert await until(ack_wait) == 30.0
        await daemon.stop()
        daemon.env["CONE_JETSTREAM_ACK_WAIT_S"] = "7"
        await daemon.restart()

        async def updated() -> bool:
            return await ack_wait() == 7.0

        await until(updated)


async def test_a_stream_laid_out_otherwise_is_refused_and_said(
    home: Path, devnet: str, nats_server: NatsServer, nc: Client
) -> None:
    daemon = DaemonProcess(home, devnet)
    async with daemon:
        inbox = (await daemon.client.identity()).inbox_id
        await daemon.stop()
        layout = Layout("cone", inbox, 4)
        # Someone else's stream under cone's name.
        await nc.jetstream().add_stream(
            StreamConfig(name=layout.stream("in"), subjects=["elsewhere.>"])
        )
        daemon.env.update(jetstream_env(nats_server.url))
        await daemon.restart()

        async def said() -> str:
            return (await daemon.status()).jetstream.error

        error = await until(said)
        assert f"the JetStream stream {layout.stream('in')} exists with another layout" in error
        # The core runs on.
        assert (await daemon.status()).inbox_messages == 0
