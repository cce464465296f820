"""What a worker does, for the tests: take exported messages from the partition
consumers (acking each), and read outcomes."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NotFoundError

from cone.jetstream.subjects import Layout

WAIT_S = 60.0


@dataclass(frozen=True)
class Exported:
    subject: str
    msg_id: str
    body: dict[str, Any]
    deliveries: int


async def take(
    nc: Client, layout: Layout, n: int, *, ack: bool = True, timeout: float = WAIT_S
) -> list[Exported]:
    """The next `n` exported messages across every partition (acked unless told not)."""
    js = nc.jetstream()
    subs = [
        await js.pull_subscribe_bind(layout.partition_consumer(p), stream=layout.stream("in"))
        for p in range(layout.partitions)
    ]
    got: list[Exported] = []
    try:
        async with asyncio.timeout(timeout):
            while len(got) < n:
                for sub in subs:
                    try:
                        msgs = await sub.fetch(1, timeout=0.2)
                    except NatsTimeout:
                        continue
                    for m in msgs:
                        got.append(
                            Exported(
                                m.subject,
                                (m.headers or {})["Nats-Msg-Id"],
                                json.loads(m.data),
                                m.metadata.num_delivered,
                            )
                        )
                        if ack:
                            await m.ack_sync()
    finally:
        for sub in subs:
            await sub.unsubscribe()
    return got


async def stored(nc: Client, layout: Layout) -> int:
    """Messages held in the inbound stream now."""
    info = await nc.jetstream().stream_info(layout.stream("in"))
    return int(info.state.messages)


async def outcome(nc: Client, layout: Layout, key: str, timeout: float = WAIT_S) -> dict[str, Any]:
    """The outcome published for a send key, once there."""
    js = nc.jetstream()
    async with asyncio.timeout(timeout):
        while True:
            try:
                msg = await js.get_last_msg(layout.stream("outcome"), layout.outcome(key))
                return dict(json.loads(msg.data))
            except NotFoundError:
                await asyncio.sleep(0.1)
