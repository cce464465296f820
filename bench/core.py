"""Core benchmarks: drain, ingest and send, each against its baseline in the same run.

    python -m bench core [--messages 10000] [--ingest 500] [--sends 200]

- drain: Receive (limit 1000) + Ack of N pending messages over cone.sock, against the
  same SQL statements (cone.store.inbox) on plain SQLite: the limit.
- ingest: a peer sends M messages into a group holding cone and a raw libxmtp client;
  time until all are in cone's durable inbox, against the raw client's stream.
- send: sequential Send with durable keys through cone, against raw libxmtp `send`
  on the same devnet; p50/p99 of each.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from xmtp_bindings import xmtpv3 as ffi

from bench import _prefill
from cone.devnet import Devnet
from cone.store import inbox
from cone.store._migrations import migrate
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, short_home
from support.peers import MessageStream, Peer
from support.waiting import until

# The daemon's default catch-up period (tests shorten it to 2 s).
PRODUCTION_PACE = {"CONE_CATCHUP_S": "30"}


def _octet_length(conn: sqlite3.Connection) -> None:
    """SQLite before 3.43 (Python's, here) lacks octet_length, which SQLCipher has and
    the receive budget uses; a Python function stands in (the baseline pays a little
    for it)."""
    if sqlite3.sqlite_version_info < (3, 43):

        def octet_length(value: object) -> int | None:
            if value is None:
                return None
            return len(value.encode() if isinstance(value, str) else bytes(value))  # type: ignore[arg-type]

        conn.create_function("octet_length", 1, octet_length, deterministic=True)


def _drain_plain_sqlite(n: int) -> float:
    """The limit: the same statements on plain SQLite (no daemon, no gRPC, no cipher)."""
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(Path(d) / "plain.db", isolation_level=None)
        _octet_length(conn)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        migrate(conn)  # type: ignore[arg-type]  # the same DB-API surface
        conn.execute("BEGIN IMMEDIATE")
        _prefill.fill(conn, n)  # type: ignore[arg-type]  # the same DB-API surface
        conn.execute("COMMIT")
        start = time.perf_counter()
        while True:
            conn.execute("BEGIN IMMEDIATE")
            batch, _ = inbox.take_pending(conn, "bench", 1000, [], 1)  # type: ignore[arg-type]
            conn.execute("COMMIT")
            if not batch:
                break
            conn.execute("BEGIN IMMEDIATE")
            inbox.ack(conn, "bench", [m.id for m in batch], 1)  # type: ignore[arg-type]
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - start
        conn.close()
    return elapsed


async def bench_drain(url: str, n: int) -> None:
    home = short_home()
    async with DaemonProcess(home, url, PRODUCTION_PACE) as d:
        await d.stop()
        _prefill.fill_home(home, n)
        await d.start()
        start = time.perf_counter()
        drained = 0
        while True:
            batch = await d.client.receive(consumer="bench", limit=1000)
            if not batch.messages:
                break
            drained += await d.client.ack([m.message_id for m in batch.messages], consumer="bench")
        elapsed = time.perf_counter() - start
    limit = _drain_plain_sqlite(n)
    print(f"drain {drained} msgs: cone {drained / elapsed:,.0f} msg/s ({elapsed:.2f} s); "
          f"plain SQLite {n / limit:,.0f} msg/s; ratio {limit / elapsed:.2f}x of the limit")  # fmt: skip


async def bench_ingest(url: str, m: int, work: Path) -> None:
    async with DaemonProcess(short_home(), url, PRODUCTION_PACE) as d:
        ident = await d.client.identity()
        sender = await Peer.create(url, work, "sender")
        raw = await Peer.create(url, work, "raw")
        opts = ffi.FfiCreateGroupOptions(
            permissions=None, group_name=None, group_image_url_square=None, group_description=None,
            custom_permission_policy_set=None, message_disappearing_settings=None, app_data=None,
        )  # fmt: skip
        group = await sender.client.conversations().create_group(
            [ident.inbox_id, raw.inbox_id], opts
        )
        gid = bytes(group.id()).hex()
        await raw.sync()
        stream = await raw.stream_all()

        async def requested() -> bool:
            return bool((await d.client.call("Requests", pb.RequestsRequest())).requests)

        await until(requested)
        await d.client.call("Accept", pb.AcceptRequest(conversation_id=gid))
        start = time.perf_counter()
        for i in range(m):
            await sender.send(group, f"ingest {i}")
        sent = time.perf_counter()
        await stream.texts(m, timeout=300)
        raw_done = time.perf_counter()

        async def ingested() -> bool:
            return bool((await d.client.call("Status", pb.StatusRequest())).inbox_messages >= m)

        await until(ingested, timeout=300)
        cone_done = time.perf_counter()
        raw_lat, cone_lat = await _ingest_latency(d, sender, group, stream, LATENCY_MESSAGES)
        await stream.end()
    print(f"ingest {m} msgs (sending took {sent - start:.2f} s): raw libxmtp stream "
          f"{m / (raw_done - start):,.0f} msg/s; cone durable inbox {m / (cone_done - start):,.0f} "
          f"msg/s; ratio {(raw_done - start) / (cone_done - start):.2f}x")  # fmt: skip
    print(f"peer-to-inbox latency, {LATENCY_MESSAGES} sequential: cone (receivable by a long "
          f"poll) p50 {_pct(cone_lat, .5):.1f} ms, p99 {_pct(cone_lat, .99):.1f} ms; raw "
          f"libxmtp stream callback p50 {_pct(raw_lat, .5):.1f} ms, p99 "
          f"{_pct(raw_lat, .99):.1f} ms")  # fmt: skip


LATENCY_MESSAGES = 100


async def _ingest_latency(
    d: DaemonProcess, sender: Peer, group: object, stream: object, n: int
) -> tuple[list[float], list[float]]:
    """Per message: send, then time its arrival at a raw client's stream callback and
    in cone's inbox (a long poll on its own consumer), measured side by side."""
    assert isinstance(stream, MessageStream)
    raw: list[float] = []
    cone: list[float] = []
    await d.client.receive(consumer="latency", limit=1)  # exists; sees only what follows
    await _drain(d, "latency")
    for i in range(n):
        start = time.perf_counter()
        await sender.send(group, f"latency {i}")

        async def at_raw(start: float = start) -> None:
            await stream.texts(1, timeout=60)
            raw.append(time.perf_counter() - start)

        async def at_cone(start: float = start) -> None:
            while True:
                batch = await d.client.receive(consumer="latency", limit=10, wait_ms=5000)
                if batch.messages:
                    cone.append(time.perf_counter() - start)
                    await d.client.ack([x.message_id for x in batch.messages], consumer="latency")
                    return

        await asyncio.gather(at_raw(), at_cone())
    return raw, cone


async def _drain(d: DaemonProcess, consumer: str) -> None:
    while batch := (await d.client.receive(consumer=consumer, limit=1000)).messages:
        await d.client.ack([x.message_id for x in batch], consumer=consumer)


def _pct(xs: list[float], p: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1000


async def bench_send(url: str, n: int, work: Path) -> None:
    async with DaemonProcess(short_home(), url, PRODUCTION_PACE) as d:
        peer = await Peer.create(url, work, "target")
        contact = (await d.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
        cone_lat = []
        start = time.perf_counter()
        for i in range(n):
            t = time.perf_counter()
            r = await d.client.call(
                "Send", pb.SendRequest(to=contact.conversation_id, text=f"cone {i}", key=f"b{i}")
            )
            assert r.published
            cone_lat.append(time.perf_counter() - t)
        cone_s = time.perf_counter() - start
        raw_s, raw_lat = await _raw_sends(url, work, peer, n, "raw-a", stream=False)
        live_s, live_lat = await _raw_sends(url, work, peer, n, "raw-b", stream=True)
    print(f"send {n} sequential: cone {n / cone_s:,.0f}/s (p50 {_pct(cone_lat, .5):.1f} ms, "
          f"p99 {_pct(cone_lat, .99):.1f} ms); raw libxmtp {n / raw_s:,.0f}/s "
          f"(p50 {_pct(raw_lat, .5):.1f} ms, p99 {_pct(raw_lat, .99):.1f} ms), ratio "
          f"{raw_s / cone_s:.2f}x; raw libxmtp with its message stream open {n / live_s:,.0f}/s "
          f"(p50 {_pct(live_lat, .5):.1f} ms, p99 {_pct(live_lat, .99):.1f} ms), ratio "
          f"{live_s / cone_s:.2f}x")  # fmt: skip


async def _raw_sends(
    url: str, work: Path, peer: Peer, n: int, name: str, *, stream: bool
) -> tuple[float, list[float]]:
    """Sequential raw libxmtp sends to `peer`; with `stream`, the sender streams too,
    as a receiving client (and cone) does."""
    sender = await Peer.create(url, work, name)
    dm = await sender.dm_with(peer)
    live = await sender.stream_all() if stream else None
    latencies = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        await sender.send(dm, f"{name} {i}")
        latencies.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - start
    if live is not None:
        await live.end()
    return elapsed, latencies


async def _main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as work:
        async with Devnet(port=0) as url:
            await bench_drain(url, args.messages)
            await bench_ingest(url, args.ingest, Path(work))
            await bench_send(url, args.sends, Path(work))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench core", description=__doc__)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--ingest", type=int, default=500)
    parser.add_argument("--sends", type=int, default=200)
    asyncio.run(_main(parser.parse_args(argv)))
