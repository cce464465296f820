"""Send throughput: cone's durable `Send` against raw libxmtp `send`, in the same run.

    python -m bench send [--sends 200] [--parallel 8] [--each 50] [--rounds 4]

One `cone devnet` subprocess (in memory) serves every client; `cone daemon` runs as a
subprocess at its production catch-up pace; the raw libxmtp clients and the bench's
gRPC client share the bench process. Each row's sides run in alternating rounds
(`--rounds`), so that the machine's load falls on both alike; the totals are summed
over the rounds.

- sequential: `--sends` `Send`s with new keys one after another into one DM, to its
  conversation id and, in the same rounds, to the peer's address (a DM cone already
  has: the same cost is the goal); against a raw libxmtp client's `send` into a DM
  with the same peer, without and with its message stream open (any receiving app
  has one, and so has cone).
- concurrent: `--parallel` DMs with as many peers, each sending `--each` messages
  with its own keys, all at once; against one raw libxmtp client sending into its
  DMs with the same peers with the same parallelism (without and with its stream).

Each side also reports its CPU per message: the sender's (the bench process, and for
cone its daemon too: cone's client side is a gRPC call) and the node's.

The floor: what any durable send through a daemon on libxmtp costs at least, measured
in the same rounds as cone's sends. A daemon that receives has its message stream open
(a raw send with its stream open); a send key is durable only once its claim is
committed and synced before the message exists in libxmtp (a synced commit of a small
row through cone's store, on the same disk); a call crosses the process boundary (the
daemon's cheapest call, `Identity`, both gRPC ends). Sequentially, where a send's time
is the sum of its steps, the floor is the sum of the three parts' times, each measured
alone. At `--parallel` at once, where the rate follows CPU, the floor's senders make
the three in turn for each message (concurrent commits sharing one, as cone's claims
do). Each floor's rate against raw libxmtp's is the most cone's ratio can reach
whatever cone's own code costs.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from cone.store import Store, meta
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, short_home
from support.devnet_process import DevnetProcess
from support.peers import MessageStream, Peer

# The daemon's default catch-up period (tests shorten it to 2 s).
PRODUCTION_PACE = {"CONE_CATCHUP_S": "30"}

_keys = itertools.count()


def _pct(xs: list[float], p: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1000


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Side:
    """One side of a row: its sends' wall time, latencies and CPU, summed over rounds.
    CPU is that of `pids` (the sending side's processes: the bench process, and for
    cone its daemon) and, apart, of the node."""

    def __init__(self, name: str, pids: list[int], node_pid: int) -> None:
        self.name = name
        self.pids = pids
        self.node_pid = node_pid
        self.seconds = 0.0
        self.sent = 0
        self.latencies: list[float] = []
        self.cpu = 0.0
        self.node_cpu = 0.0

    def rate(self) -> float:
        return self.sent / self.seconds

    def summary(self) -> str:
        return (
            f"{self.name}: {self.rate():,.0f}/s (p50 {_pct(self.latencies, 0.5):.1f} ms, "
            f"p99 {_pct(self.latencies, 0.99):.1f} ms; CPU per message: sender "
            f"{self.cpu / self.sent * 1000:.2f} ms, node {self.node_cpu / self.sent * 1000:.2f} ms)"
        )


def _cone_send(d: DaemonProcess, to: str) -> Callable[[], Awaitable[None]]:
    async def send() -> None:
        n = next(_keys)
        r = await d.client.call("Send", pb.SendRequest(to=to, text=f"cone {n}", key=f"k{n}"))
        assert r.published, r

    return send


def _raw_send(sender: Peer, dm: Any) -> Callable[[], Awaitable[None]]:
    async def send() -> None:
        await sender.send(dm, f"raw {next(_keys)}")

    return send


def _identity(d: DaemonProcess) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        await d.client.identity()

    return call


def _synced_commit(store: Store) -> Callable[[], Awaitable[None]]:
    async def commit() -> None:
        await store.write_grouped(meta.put, "floor", f"claim {next(_keys)}".encode() * 8)

    return commit


def _floor_send(
    d: DaemonProcess, store: Store, sender: Peer, dm: Any
) -> Callable[[], Awaitable[None]]:
    """One message's floor: the daemon's cheapest call, a synced commit, a raw send
    with the stream open, in turn (the module docstring)."""
    call, commit, send = _identity(d), _synced_commit(store), _raw_send(sender, dm)

    async def floor() -> None:
        await call()
        await commit()
        await send()

    return floor


async def _serial(sends: list[Callable[[], Awaitable[None]]]) -> None:
    for s in sends:
        await s()


async def _lanes(side: Side, lanes: list[Callable[[], Awaitable[None]]], each: int) -> None:
    """`len(lanes)` senders at once, each `each` sends one after another."""

    async def lane(send: Callable[[], Awaitable[None]]) -> None:
        for _ in range(each):
            t = time.perf_counter()
            await send()
            side.latencies.append(time.perf_counter() - t)

    cpu = sum(_cpu_s(p) for p in side.pids)
    node_cpu = _cpu_s(side.node_pid)
    start = time.perf_counter()
    await asyncio.gather(*(lane(s) for s in lanes))
    side.seconds += time.perf_counter() - start
    side.cpu += sum(_cpu_s(p) for p in side.pids) - cpu
    side.node_cpu += _cpu_s(side.node_pid) - node_cpu
    side.sent += each * len(lanes)


async def _rounds(
    rounds: int, phases: list[tuple[Side, Callable[[Side], Awaitable[None]]]]
) -> None:
    for r in range(rounds):
        order = phases if r % 2 == 0 else list(reversed(phases))
        for side, phase in order:
            await phase(side)


async def sequential(url: str, node: int, work: Path, n: int, rounds: int) -> list[Side]:
    async with DaemonProcess(short_home(), url, PRODUCTION_PACE) as d:
        target = await Peer.create(url, work, "target")
        first = await d.client.call("Send", pb.SendRequest(to=target.address, text="hi", key="s0"))
        conversation_id = first.conversation_id
        raw = await Peer.create(url, work, "raw")
        raw_dm = await raw.dm_with(target)
        live = await Peer.create(url, work, "live")
        live_dm = await live.dm_with(target)
        stream: MessageStream = await live.stream_all()
        store = Store.open(work / "floor.db", os.urandom(32))
        # Warm up each side (first sends open connections and caches).
        for s in (_cone_send(d, conversation_id), _cone_send(d, target.address)):
            await _serial([s] * 5)
        await _serial([_raw_send(raw, raw_dm)] * 5 + [_raw_send(live, live_dm)] * 5)
        per = max(1, n // rounds)

        def serial(make: Callable[[], Callable[[], Awaitable[None]]]) -> Any:
            return lambda side: _lanes(side, [make()], per)

        assert d.proc is not None
        cone, raw_pids = [os.getpid(), d.proc.pid], [os.getpid()]
        sides = [
            Side("cone Send to the conversation id", cone, node),
            Side("cone Send to the address", cone, node),
            Side("raw libxmtp send", raw_pids, node),
            Side("raw libxmtp send, message stream open", raw_pids, node),
            Side("the daemon's cheapest call (Identity)", cone, node),
            Side("a synced commit of a small row through cone's store", raw_pids, node),
        ]
        await _rounds(
            rounds,
            [
                (sides[0], serial(lambda: _cone_send(d, conversation_id))),
                (sides[1], serial(lambda: _cone_send(d, target.address))),
                (sides[2], serial(lambda: _raw_send(raw, raw_dm))),
                (sides[3], serial(lambda: _raw_send(live, live_dm))),
                (sides[4], serial(lambda: _identity(d))),
                (sides[5], serial(lambda: _synced_commit(store))),
            ],
        )
        await stream.end()
        store.close()
    return sides


async def concurrent(
    url: str, node: int, work: Path, parallel: int, each: int, rounds: int
) -> list[Side]:
    async with DaemonProcess(short_home(), url, PRODUCTION_PACE) as d:
        targets = [await Peer.create(url, work, f"t{i}") for i in range(parallel)]
        conversations = []
        for i, t in enumerate(targets):
            r = await d.client.call("Send", pb.SendRequest(to=t.address, text="hi", key=f"c{i}"))
            conversations.append(r.conversation_id)
        raw = await Peer.create(url, work, "raw8")
        raw_dms = [await raw.dm_with(t) for t in targets]
        live = await Peer.create(url, work, "live8")
        live_dms = [await live.dm_with(t) for t in targets]
        stream = await live.stream_all()
        store = Store.open(work / "floor8.db", os.urandom(32))
        cone_lanes = [_cone_send(d, c) for c in conversations]
        raw_lanes = [_raw_send(raw, dm) for dm in raw_dms]
        live_lanes = [_raw_send(live, dm) for dm in live_dms]
        floor_lanes = [_floor_send(d, store, live, dm) for dm in live_dms]
        for lanes in (cone_lanes, raw_lanes, live_lanes, floor_lanes):
            await _lanes(Side("warm-up", [], node), lanes, 2)
        per = max(1, each // rounds)
        assert d.proc is not None
        cone, raw_pids = [os.getpid(), d.proc.pid], [os.getpid()]
        sides = [
            Side(f"cone, {parallel} conversations at once", cone, node),
            Side(f"raw libxmtp, {parallel} DMs at once", raw_pids, node),
            Side(f"raw libxmtp, {parallel} DMs at once, message stream open", raw_pids, node),
            Side(f"floor, {parallel} senders at once", cone, node),
        ]
        await _rounds(
            rounds,
            [
                (sides[0], lambda side: _lanes(side, cone_lanes, per)),
                (sides[1], lambda side: _lanes(side, raw_lanes, per)),
                (sides[2], lambda side: _lanes(side, live_lanes, per)),
                (sides[3], lambda side: _lanes(side, floor_lanes, per)),
            ],
        )
        await stream.end()
        store.close()
    return sides


def _parts(cone: list[Side], raw: Side, live: Side, call: Side, commit: Side) -> None:
    """The sequential floor: its parts' times, each measured alone, added up."""
    parts = [side.seconds / side.sent * 1000 for side in (live, call, commit)]
    print(
        f"  floor of a durable send through a daemon: {parts[0]:.2f} ms (raw send, stream open)"
        f" + {parts[1]:.2f} ms (the daemon's cheapest call) + {parts[2]:.2f} ms (a synced"
        f" commit) = {sum(parts):.2f} ms"
    )
    _against_floor(cone, raw, live, 1000 / sum(parts))


def _against_floor(cone: list[Side], raw: Side, live: Side, floor_rate: float) -> None:
    """A floor's rate (the module docstring) against the raw sides, and cone against it."""
    print(
        f"  floor: at most {floor_rate / raw.rate():.2f}x raw libxmtp,"
        f" {floor_rate / live.rate():.2f}x raw libxmtp with its stream open"
    )
    for c in cone:
        print(f"  {c.name}: {c.rate() / floor_rate:.2f}x the floor")
    print(f"  the stream alone: {live.rate() / raw.rate():.2f}x raw libxmtp")


def _report(title: str, cone: list[Side], raws: list[Side]) -> None:
    print(title)
    for side in cone + raws:
        print(f"  {side.summary()}")
    for c in cone:
        ratios = ", ".join(f"{c.rate() / r.rate():.2f}x {r.name}" for r in raws)
        print(f"  ratio of {c.name}: {ratios}")


async def _main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        node = await DevnetProcess.start(work)
        try:
            pid = node.process.pid
            seq = await sequential(node.url, pid, work, args.sends, args.rounds)
            _report(f"sequential, {args.sends} sends per side", seq[:2], seq[2:4])
            print(f"  address / conversation id: {seq[1].rate() / seq[0].rate():.2f}x")
            for side in seq[4:]:
                print(f"  {side.summary()}")
            _parts(seq[:2], *seq[2:6])
            conc = await concurrent(node.url, pid, work, args.parallel, args.each, args.rounds)
            _report(
                f"concurrent, {args.parallel} x {args.each} sends per side", conc[:1], conc[1:3]
            )
            print(f"  {conc[3].summary()}")
            _against_floor(conc[:1], conc[1], conc[2], conc[3].rate())
        finally:
            await node.stop()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench send", description=__doc__)
    parser.add_argument("--sends", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--each", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    asyncio.run(_main(parser.parse_args(argv)))
