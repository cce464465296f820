"""JetStream: the export against cone's own ingest, a message's way to a worker, and
replies per second with 1, 4 and 16 workers.

    python -m bench jetstream [--conversations 16] [--backlog 200] [--latency 100]
                              [--replies 96] [--think-ms 50] [--workers 1,4,16]

One `cone devnet` subprocess, one `nats-server` (the distribution's), and `cone daemon
--jetstream` (16 partitions) as subprocesses; `--conversations` peers (real libxmtp
clients in the bench process), each in an accepted DM with the daemon; the workers are
tasks of the bench process, each with its own NATS connection.

- **export vs ingest**: with JetStream stopped, the peers send `--backlog` messages;
  the ingest rate is theirs from the first send until cone's inbox holds them all.
  Then JetStream starts, and the export rate is the backlog from the first exported
  message until the stream holds the last (read every 10 ms). Goal: ≥ 1.0× ingest.
- **send → worker**: one worker per partition; the peers send `--latency` messages one
  after the other; p50/p99 from a peer's `send_text` until a worker has the message,
  beside the same for cone's own `receive` (a long poll on another consumer).
- **replies/s**: with no worker running, the peers send `--replies` messages and the
  stream holds them; then W workers start, each serving P/W of the 16 partitions
  (static assignment) and taking one turn at a time (an agent), each turn thinking
  `--think-ms` and publishing a reply; the rate is `--replies` over the time until every
  outcome is out, beside cone's own reply path alone (the same number of replies
  through gRPC, one conversation's at a time, all conversations at once). Goal: more
  workers, more replies, until XMTP's send path is the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import nats
from nats.errors import TimeoutError as NatsTimeout

from cone.jetstream.subjects import Layout
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, short_home
from support.devnet_process import DevnetProcess
from support.nats import NatsServer
from support.peers import Peer

PARTITIONS = 16
POLL_S = 0.01
LIMIT_S = 600.0


def percentile_ms(xs: list[float], p: float) -> float:
    """The `p` quantile of `xs` (seconds), in milliseconds."""
    return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1000


async def _until(probe: Any) -> float:
    """Poll `probe` until true; the monotonic time it was first seen true."""
    async with asyncio.timeout(LIMIT_S):
        while True:
            if await probe():
                return time.monotonic()
            await asyncio.sleep(POLL_S)


class Setup:
    """The devnet, the server, the daemon and the peers' DMs."""

    def __init__(self, d: DaemonProcess, server: NatsServer, layout: Layout) -> None:
        self.d = d
        self.server = server
        self.layout = layout
        self.dms: list[tuple[Peer, Any]] = []
        self.sent: dict[str, float] = {}

    async def send(self, n: int, tag: str) -> None:
        """`n` messages, spread over the peers, each peer's in turn; times recorded."""

        async def one_peer(i: int, peer: Peer, dm: Any) -> None:
            for j in range(i, n, len(self.dms)):
                text = f"{tag}-{j}"
                self.sent[text] = time.monotonic()
                await peer.send(dm, text)

        await asyncio.gather(*(one_peer(i, p, dm) for i, (p, dm) in enumerate(self.dms)))

    async def inbox(self) -> int:
        status = await self.d.status()
        return int(status.inbox_messages)

    async def stream_last(self, nc: Any) -> int:
        info = await nc.jetstream().stream_info(self.layout.stream("in"))
        return int(info.state.last_seq)


async def _worker(
    setup: Setup,
    partitions: list[int],
    think_s: float,
    seen: dict[str, float],
    stop: asyncio.Event,
    reply: bool,
) -> None:
    """One worker: one turn at a time (an agent), listening on each of its partitions."""
    layout = setup.layout
    nc = await nats.connect(setup.server.url)
    js = nc.jetstream()
    turn = asyncio.Lock()

    async def partition(p: int) -> None:
        sub = await js.pull_subscribe_bind(layout.partition_consumer(p), stream=layout.stream("in"))
        while not stop.is_set():
            try:
                msgs = await sub.fetch(1, timeout=0.5)
            except NatsTimeout:
                continue
            for msg in msgs:
                body = json.loads(msg.data)
                seen.setdefault(body.get("text", ""), time.monotonic())
                async with turn:
                    await asyncio.sleep(think_s)
                    if reply:
                        params = {"conversationId": body["conversationId"], "text": "ok"}
                        await js.publish(
                            layout.out("reply"),
                            json.dumps(params).encode(),
                            headers={"Nats-Msg-Id": f"reply:{body['messageId']}"},
                        )
                    await msg.ack_sync()

    try:
        await asyncio.gather(*(partition(p) for p in partitions))
    finally:
        await nc.close()


def _workers(
    setup: Setup,
    count: int,
    think_s: float,
    seen: dict[str, float],
    stop: asyncio.Event,
    reply: bool = True,
) -> list[asyncio.Task[None]]:
    return [
        asyncio.create_task(
            _worker(setup, list(range(w, PARTITIONS, count)), think_s, seen, stop, reply)
        )
        for w in range(count)
    ]


async def _drain(setup: Setup) -> None:
    """Take whatever the stream holds, without replying."""
    nc = await nats.connect(setup.server.url)
    stop = asyncio.Event()
    tasks = _workers(setup, PARTITIONS, 0.0, {}, stop, reply=False)
    try:

        async def empty() -> bool:
            info = await nc.jetstream().stream_info(setup.layout.stream("in"))
            return int(info.state.messages) == 0

        await _until(empty)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await nc.close()


async def _export_vs_ingest(setup: Setup, n: int) -> None:
    await setup.server.stop()
    base = await setup.inbox()
    t0 = time.monotonic()
    await setup.send(n, "backlog")
    t_ingest = await _until(lambda: _ge(setup.inbox(), base + n))
    ingest = n / (t_ingest - t0)
    await setup.server.start()
    await setup.server.ready()
    nc = await nats.connect(setup.server.url)
    try:
        t_first = await _until(lambda: _ge(setup.stream_last(nc), 1))
        t_last = await _until(lambda: _ge(setup.stream_last(nc), n))
    finally:
        await nc.close()
    export = (n - 1) / max(t_last - t_first, 1e-6)
    print(f"ingest: {n} messages at {ingest:.0f}/s (peers' sends to cone's inbox)")
    print(
        f"export: the backlog at {export:.0f}/s to JetStream; ratio export/ingest {export / ingest:.1f}x"
    )


async def _ge(value: Any, n: int) -> bool:
    return bool(await value >= n)


async def _latency(setup: Setup, n: int) -> None:
    seen: dict[str, float] = {}
    received: dict[str, float] = {}
    stop = asyncio.Event()
    # One worker per partition, each waiting on its own: the path's latency, no polling.
    tasks = _workers(setup, PARTITIONS, 0.0, seen, stop, reply=False)

    async def baseline() -> None:
        """cone's own receive on another consumer: the same messages without JetStream."""
        while not stop.is_set():
            batch = await setup.d.client.receive("bench", limit=100, wait_ms=500)
            for m in batch.messages:
                received.setdefault(m.text, time.monotonic())
            if batch.messages:
                await setup.d.client.ack([m.message_id for m in batch.messages], "bench")

    tasks.append(asyncio.create_task(baseline()))
    try:
        setup.sent.clear()
        for i in range(n):  # one after the other: the path's latency, not a queue's
            await setup.send(1, f"lat{i}")
            text = f"lat{i}-0"
            await _until(lambda text=text: _has(seen, text))  # type: ignore[misc]
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    for name, times in (("cone receive", received), ("JetStream worker", seen)):
        lat = [times[t] - s for t, s in setup.sent.items() if t in times]
        print(
            f"send -> {name}: p50 {percentile_ms(lat, 0.5):.0f} ms, "
            f"p99 {percentile_ms(lat, 0.99):.0f} ms ({len(lat)} messages)"
        )


async def _has(seen: dict[str, float], text: str) -> bool:
    return text in seen


async def _replies(setup: Setup, n: int, workers: int, think_s: float, tag: str) -> float:
    nc = await nats.connect(setup.server.url)
    outcomes: list[float] = []

    async def on_outcome(msg: Any) -> None:
        if json.loads(msg.data).get("ok"):
            outcomes.append(time.monotonic())

    sub = await nc.subscribe(setup.layout.outcome_all, cb=on_outcome)
    before = await setup.stream_last(nc)
    await setup.send(n, tag)
    await _until(lambda: _ge(setup.stream_last(nc), before + n))
    seen: dict[str, float] = {}
    stop = asyncio.Event()
    t0 = time.monotonic()
    tasks = _workers(setup, workers, think_s, seen, stop)
    try:
        t_end = await _until(lambda: _count(outcomes, n))
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await sub.unsubscribe()
        await nc.close()
    rate = n / (t_end - t0)
    print(f"replies: {workers:2d} worker(s): {rate:5.1f}/s ({n} turns of {think_s * 1000:.0f} ms)")
    return rate


async def _send_path(setup: Setup, n: int) -> float:
    """cone's own reply path without JetStream: `n` replies over the conversations, one
    at a time per conversation (as the bridge sends them), all conversations at once."""
    cids = [dm.id().hex() for _, dm in setup.dms]

    async def one(i: int, cid: str) -> None:
        for j in range(i, n, len(cids)):
            req = pb.ReplyRequest(conversation_id=cid, text="ok", key=f"direct-{j}")
            await setup.d.client.call("Reply", req)

    t0 = time.monotonic()
    await asyncio.gather(*(one(i, c) for i, c in enumerate(cids)))
    rate = n / (time.monotonic() - t0)
    print(f"replies: cone's send path alone (gRPC, no JetStream): {rate:.1f}/s ({n} replies)")
    return rate


async def _count(xs: list[float], n: int) -> bool:
    return len(xs) >= n


def _plot(workers: list[int], rates: list[float], alone: float) -> None:
    """The curve, as docs/bench.md shows it: a bar per worker count, and the send path's."""
    top = max([*rates, alone])
    rows = [(f"{w:2d} worker(s)", r) for w, r in zip(workers, rates, strict=True)]
    rows.append(("send path", alone))
    for label, rate in rows:
        print(f"  {label:>12} | {'#' * round(40 * rate / top):<40} {rate:.1f}/s")


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="cone-jetstream-"))
    devnet = await DevnetProcess.start(work)
    try:
        async with NatsServer(work / "nats") as server:
            env = {
                "CONE_CATCHUP_S": "30",
                "CONE_JETSTREAM": server.url,
                "CONE_JETSTREAM_PARTITIONS": str(PARTITIONS),
            }
            async with DaemonProcess(short_home(), devnet.url, env) as d:
                inbox = (await d.client.identity()).inbox_id
                setup = Setup(d, server, Layout("cone", inbox, PARTITIONS))
                for i in range(args.conversations):
                    peer = await Peer.create(devnet.url, work, f"peer{i}")
                    contact = await d.client.call("Connect", pb.ConnectRequest(to=peer.address))
                    await peer.sync()
                    cid = contact.contact.conversation_id
                    setup.dms.append((peer, peer.conversation(bytes.fromhex(cid))))
                await _export_vs_ingest(setup, args.backlog)
                await _drain(setup)
                await _latency(setup, args.latency)
                rates = []
                for w in args.workers:
                    rates.append(
                        await _replies(setup, args.replies, w, args.think_ms / 1000, f"r{w}")
                    )
                alone = await _send_path(setup, args.replies)
                _plot(args.workers, rates, alone)
                for peer, _ in setup.dms:
                    peer.close()
    finally:
        devnet.process.terminate()
        await devnet.process.wait()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench jetstream")
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--backlog", type=int, default=200)
    parser.add_argument("--latency", type=int, default=50)
    parser.add_argument("--replies", type=int, default=96)
    parser.add_argument("--think-ms", type=float, default=50.0)
    parser.add_argument("--workers", default="1,4,16", help="comma-separated worker counts")
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",")]
    asyncio.run(run(args))
