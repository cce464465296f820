"""Send throughput: cone against the official XMTP Node SDK, in the same run.

    python -m bench send [--sends 200] [--parallel 8] [--each 40] [--rounds 4]

One `cone devnet` subprocess (in memory) serves every client; `cone daemon` runs as a
subprocess at its production catch-up pace; the Node SDK (5.5.0, `tests/node`, with
`streamAllMessages` open, as any receiving app has) runs in its own `node` process
(`xmtp_peer.mjs`'s `sendTexts`, timed inside it); raw libxmtp runs in the bench
process with its message stream open. Each row's sides run in alternating rounds
(`--rounds`), so that the machine's load falls on all alike; totals are summed.

- sequential: `--sends` sends with new keys one after another into one DM: cone's
  `Send` over gRPC and `send` over JSON-RPC on one kept connection to `cone.sock`,
  against the SDK's `sendText` (goal: cone ≥ 1.0× the SDK on both); and cone's `Send`
  to the peer's address (a DM cone has: the same cost as to the conversation id).
- concurrent: `--parallel` DMs, each sending `--each` messages one after another, all
  at once: cone's `Send` over gRPC with its own keys, against the SDK's `sendText`
  (goal: cone ≥ 1.2× the SDK).
- one conversation: `--parallel` senders at once into one DM, `--each` messages
  each (an agent answering several messages of one conversation at once); no goal.
- the design's floor (bench/_floor.py): cone's steps on raw libxmtp in this process,
  with no daemon around them, sequentially and into the `--parallel` DMs: what no
  build of this design can beat.

Without `node` or the SDK installed (`npm ci --prefix tests/node`), the SDK's sides
are skipped with a line saying so, and cone is reported against raw libxmtp alone.
CPU per message: cone's daemon, the SDK's process, the bench process for raw libxmtp.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench._against_sdk import SKIPPED, against_sdk
from bench._floor import Floor
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, short_home
from support.node_peer import NodePeer
from support.peers import Peer

# The daemon's default catch-up period (tests shorten it to 2 s).
PRODUCTION_PACE = {"CONE_CATCHUP_S": "30"}
GOALS = {"sequential": 1.0, "concurrent": 1.2}

_keys = itertools.count()


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all threads, and of its children it
    has waited for (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class Side:
    """One sender: its sends' wall time, latencies and CPU, summed over rounds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seconds = 0.0
        self.sent = 0
        self.latencies: list[float] = []
        self.cpu = 0.0

    def add(self, seconds: float, latencies: list[float], cpu: float) -> None:
        self.seconds += seconds
        self.sent += len(latencies)
        self.latencies += latencies
        self.cpu += cpu

    def rate(self) -> float:
        return self.sent / self.seconds

    def summary(self) -> str:
        p50 = statistics.median(self.latencies) * 1000
        return (
            f"{self.name}: {self.rate():,.0f}/s (p50 {p50:.2f} ms,"
            f" CPU {self.cpu / self.sent * 1000:.2f} ms a message)"
        )


Send = Callable[[int], Awaitable[None]]


async def _lanes(side: Side, lanes: list[Send], each: int, pid: int) -> None:
    """`len(lanes)` senders at once, each `each` sends one after another."""
    latencies: list[float] = []

    async def lane(send: Send) -> None:
        for _ in range(each):
            t = time.perf_counter()
            await send(next(_keys))
            latencies.append(time.perf_counter() - t)

    cpu = _cpu_s(pid)
    start = time.perf_counter()
    await asyncio.gather(*(lane(s) for s in lanes))
    side.add(time.perf_counter() - start, latencies, _cpu_s(pid) - cpu)


def _grpc(d: DaemonProcess, to: str) -> Send:
    async def send(n: int) -> None:
        r = await d.client.call("Send", pb.SendRequest(to=to, text=f"cone {n}", key=f"k{n}"))
        assert r.published, r

    return send


class JsonRpc:
    """JSON-RPC on one kept connection to cone.sock, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, d: DaemonProcess) -> JsonRpc:
        reader, writer = await asyncio.open_unix_connection(str(d.socket), limit=1 << 24)
        return cls(reader, writer)

    def sender(self, to: str) -> Send:
        async def send(n: int) -> None:
            params = {"to": to, "text": f"cone {n}", "key": f"j{n}"}
            request = {"jsonrpc": "2.0", "id": n, "method": "send", "params": params}
            self.writer.write(json.dumps(request).encode() + b"\n")
            answer = json.loads(await self.reader.readline())
            assert answer["result"]["published"], answer

        return send

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def _raw(dm: Any) -> Send:
    async def send(n: int) -> None:
        await dm.send_text(f"raw {n}")

    return send


async def _sdk(side: Side, sdk: NodePeer, conversation_ids: list[str], each: int) -> None:
    r = await sdk.call("sendTexts", conversationIds=conversation_ids, each=each)
    side.add(r["seconds"], [ms / 1000 for ms in r["latenciesMs"]], r["cpuSeconds"])


async def _rounds(rounds: int, phases: list[Callable[[], Awaitable[None]]]) -> None:
    for r in range(rounds):
        for phase in phases if r % 2 == 0 else list(reversed(phases)):
            await phase()


async def run(args: argparse.Namespace, url: str, work: Path, sdk: NodePeer | None) -> None:
    async with DaemonProcess(short_home(), url, PRODUCTION_PACE) as d:
        assert d.proc is not None
        daemon, me = d.proc.pid, os.getpid()
        targets = [await Peer.create(url, work, f"t{i}") for i in range(args.parallel)]
        cone_ids = []
        for i, t in enumerate(targets):
            r = await d.client.call("Send", pb.SendRequest(to=t.address, text="hi", key=f"c{i}"))
            cone_ids.append(r.conversation_id)
        raw = await Peer.create(url, work, "raw")
        raw_dms = [await raw.dm_with(t) for t in targets]
        stream = await raw.stream_all()
        floor = await Floor.create(url, work, targets)
        sdk_ids = []
        if sdk is not None:
            sdk_ids = [
                (await sdk.call("dm", inboxId=t.inbox_id))["conversationId"] for t in targets
            ]
            await sdk.call("stream")
        rpc = await JsonRpc.open(d)
        # Warm up every side (first sends open connections and fill caches).
        for lanes, pid in (
            ([_grpc(d, c) for c in cone_ids], daemon),
            ([rpc.sender(cone_ids[0])], daemon),
            ([_raw(dm) for dm in raw_dms], me),
            ([floor.sender(dm) for dm in floor.dms], me),
        ):
            await _lanes(Side("warm-up"), lanes, 3, pid)
        if sdk is not None:
            await _sdk(Side("warm-up"), sdk, sdk_ids, 3)

        per = max(1, args.sends // args.rounds)
        seq = [
            Side("cone Send over gRPC"),
            Side("cone send over JSON-RPC on cone.sock"),
            Side("Node SDK sendText"),
            Side("raw libxmtp send (Python)"),
            Side("cone Send over gRPC to the address"),
            Side("cone's steps on raw libxmtp, in process (the design's floor)"),
        ]
        phases: list[Callable[[], Awaitable[None]]] = [
            lambda: _lanes(seq[0], [_grpc(d, cone_ids[0])], per, daemon),
            lambda: _lanes(seq[1], [rpc.sender(cone_ids[0])], per, daemon),
            lambda: _lanes(seq[3], [_raw(raw_dms[0])], per, me),
            lambda: _lanes(seq[4], [_grpc(d, targets[0].address)], per, daemon),
            lambda: _lanes(seq[5], [floor.sender(floor.dms[0])], per, me),
        ]
        if sdk is not None:
            phases.insert(2, lambda: _sdk(seq[2], sdk, sdk_ids[:1], per))
        await _rounds(args.rounds, phases)

        each = max(1, args.each // args.rounds)
        one = [
            Side(f"cone Send over gRPC, {args.parallel} senders in one conversation"),
            Side(f"Node SDK sendText, {args.parallel} senders in one conversation"),
            Side(f"raw libxmtp send (Python), {args.parallel} senders in one conversation"),
        ]
        phases = [
            lambda: _lanes(one[0], [_grpc(d, cone_ids[0])] * args.parallel, each, daemon),
            lambda: _lanes(one[2], [_raw(raw_dms[0])] * args.parallel, each, me),
        ]
        if sdk is not None:
            phases.insert(1, lambda: _sdk(one[1], sdk, sdk_ids[:1] * args.parallel, each))
        await _rounds(args.rounds, phases)

        conc = [
            Side(f"cone Send over gRPC, {args.parallel} conversations"),
            Side(f"Node SDK sendText, {args.parallel} conversations"),
            Side(f"raw libxmtp send (Python), {args.parallel} conversations"),
            Side(f"the design's floor, {args.parallel} conversations"),
        ]
        phases = [
            lambda: _lanes(conc[0], [_grpc(d, c) for c in cone_ids], each, daemon),
            lambda: _lanes(conc[2], [_raw(dm) for dm in raw_dms], each, me),
            lambda: _lanes(conc[3], [floor.sender(dm) for dm in floor.dms], each, me),
        ]
        if sdk is not None:
            phases.insert(1, lambda: _sdk(conc[1], sdk, sdk_ids, each))
        await _rounds(args.rounds, phases)
        await rpc.close()
        await stream.end()
        await floor.close()

    _report("sequential, one conversation", seq[:2], seq[2], seq[3], sdk, GOALS["sequential"])
    print(f"  {seq[4].summary()}: {seq[4].rate() / seq[0].rate():.2f}x the conversation id")
    _floor_line(seq[5], seq[2], sdk)
    _report(
        f"{args.parallel} conversations at once", conc[:1], conc[1], conc[2], sdk,
        GOALS["concurrent"],
    )  # fmt: skip
    _floor_line(conc[3], conc[1], sdk)
    _report(f"{args.parallel} senders at once in one conversation", one[:1], one[1], one[2], sdk)


def _floor_line(floor: Side, sdk_side: Side, sdk: NodePeer | None) -> None:
    against = f": {floor.rate() / sdk_side.rate():.2f}x the Node SDK" if sdk is not None else ""
    print(f"  {floor.summary()}{against}")


def _report(
    title: str,
    cone: list[Side],
    sdk_side: Side,
    raw: Side,
    sdk: NodePeer | None,
    goal: float | None = None,
) -> None:
    print(title)
    for side in [*cone, *([sdk_side] if sdk is not None else []), raw]:
        print(f"  {side.summary()}")
    for c in cone:
        against = [f"{c.rate() / raw.rate():.2f}x raw libxmtp"]
        if sdk is not None:
            wanted = f" (goal {goal}x)" if goal else ""
            against.insert(0, f"{c.rate() / sdk_side.rate():.2f}x the Node SDK{wanted}")
        print(f"  {c.name}: {', '.join(against)}")
    if sdk is None:
        print(SKIPPED)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench send", description=__doc__)
    parser.add_argument("--sends", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--each", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=4)
    against_sdk(run, parser.parse_args(argv))
