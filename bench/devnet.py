"""The devnet's cost against libxmtp's: is the local node ever the bottleneck?

    python -m bench devnet [--messages 1000]

Two raw libxmtp clients on a `cone devnet` subprocess (in memory): Alice sends N
texts in a DM one after another, Bob streams them. Reported:

- libxmtp: messages/s end to end, and p50/p99 latency from the start of Alice's
  `send_text` to Bob's stream callback;
- the node: its own server time per SendGroupMessages call and per streamed
  delivery (measured inside the handlers, read over the control socket), all its
  server time per message (every RPC the run caused), and its process CPU time
  per message (all threads, grpc's included; from /proc, Linux only);
- libxmtp against the node (goal: the node at least 5x cheaper): a send's wall
  time against the node's server time per message, and the CPU of this process
  (both libxmtp clients, plus a little Python) against the node's CPU;
- the node alone, driven by a raw gRPC client with sequential calls: its CPU per
  unary call and per streamed delivery (a send with a subscriber, less a send
  without), against a trivial grpc.aio call (the floor no handler can go below).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import grpc.aio
from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import ControlClient
from conepb.devnet.v1 import control_pb2 as pb
from conepb.xmtp import mls_api_pb2 as mls
from support import wire
from support.devnet_process import DevnetProcess
from support.peers import Peer, text_of

SEND = "/xmtp.mls.api.v1.MlsApi/SendGroupMessages"
WARMUP = 20


class _Arrivals(ffi.FfiMessageCallback):  # type: ignore[misc]  # untyped bindings base
    """Stamps each streamed text as it arrives, on libxmtp's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, expected: int) -> None:
        self.at: dict[str, float] = {}
        self._loop = loop
        self._expected = expected
        self._lock = threading.Lock()
        self.done = asyncio.Event()

    def on_message(self, message: Any) -> None:
        now = time.perf_counter()
        text = text_of(message)
        if text is None:
            return
        with self._lock:
            self.at.setdefault(text, now)
            if len(self.at) >= self._expected:
                self._loop.call_soon_threadsafe(self.done.set)

    def on_error(self, error: Any) -> None:
        print(f"stream error: {error}", file=sys.stderr)

    def on_close(self) -> None:
        pass


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all threads (Linux /proc)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _totals(stats: pb.GetStatsResponse) -> tuple[dict[str, tuple[int, int]], int, int]:
    methods = {m.method: (m.calls, m.total_ns) for m in stats.methods}
    return methods, stats.stream_deliveries, stats.stream_delivery_total_ns


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def node_alone(url: str, pid: int, n: int) -> dict[str, float]:
    """Node CPU (us) per call of each kind, from a raw client's sequential calls."""
    out: dict[str, float] = {}
    async with wire.node(url) as node:
        group, quiet = b"bench-alone", b"bench-quiet"
        await wire.send(node, group)

        async def per_call(name: str, call: Any) -> None:
            await call()
            start = _cpu_s(pid)
            for _ in range(n):
                await call()
            out[name] = (_cpu_s(pid) - start) / n * 1e6

        empty = node.channel.unary_unary("/grpc.health.v1.Health/Check")

        async def unimplemented() -> None:
            try:
                await empty(b"")
            except grpc.aio.AioRpcError:
                pass

        await per_call("a call the server refuses (UNIMPLEMENTED)", unimplemented)
        await per_call("QueryGroupMessages", lambda: wire.query(node, group))
        await per_call("SendGroupMessages, no subscriber", lambda: wire.send(node, quiet))
        newest = (await wire.query(node, group, limit=1)).messages[0].v1.id
        stream = node.mls.SubscribeGroupMessages(
            mls.SubscribeGroupMessagesRequest(
                filters=[mls.SubscribeGroupMessagesRequest.Filter(group_id=group, id_cursor=newest)]
            )
        )

        async def send_and_receive() -> None:
            await wire.send(node, group)
            await stream.read()

        await stream.initial_metadata()
        await per_call("SendGroupMessages + its delivery", send_and_receive)
        stream.cancel()
    return out


async def run(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d)
        control = directory / "ctl.sock"
        node = await DevnetProcess.start(directory, "--control", str(control))
        ctl = ControlClient(control)
        try:
            alone = await node_alone(node.url, node.process.pid, 2000)
            alice = await Peer.create(node.url, directory, "alice")
            bob = await Peer.create(node.url, directory, "bob")
            dm = await alice.dm_with(bob)
            arrivals = _Arrivals(asyncio.get_running_loop(), WARMUP + n)
            closer = await bob.client.conversations().stream_all_messages(arrivals, None)
            await closer.wait_for_ready()
            for i in range(WARMUP):
                await alice.send(dm, f"warmup {i}")

            before, cpu_before = _totals(ctl.stats()), _cpu_s(node.process.pid)
            own_before = time.process_time()
            sent_at: dict[str, float] = {}
            start = time.perf_counter()
            for i in range(n):
                text = f"m{i}"
                sent_at[text] = time.perf_counter()
                await alice.send(dm, text)
            sending = time.perf_counter() - start
            async with asyncio.timeout(60):
                await arrivals.done.wait()
            total = max(arrivals.at[t] for t in sent_at) - start
            own_cpu = time.process_time() - own_before
            after, cpu_after = _totals(ctl.stats()), _cpu_s(node.process.pid)
            await closer.end_and_wait()
        finally:
            ctl.close()
            await node.stop()

    latencies_ms = [(arrivals.at[t] - sent_at[t]) * 1000 for t in sent_at]
    calls = {
        m: (c - before[0].get(m, (0, 0))[0], ns - before[0].get(m, (0, 0))[1])
        for m, (c, ns) in after[0].items()
    }
    send_calls, send_ns = calls.get(SEND, (0, 0))
    deliveries, delivery_ns = after[1] - before[1], after[2] - before[2]
    us = 1000.0  # ns per us
    libxmtp_us = sending / n * 1e6
    libxmtp_cpu_us = own_cpu / n * 1e6
    node_us = (sum(ns for _, ns in calls.values()) + delivery_ns) / n / us
    node_cpu_us = (cpu_after - cpu_before) / n * 1e6
    p50, p99 = statistics.median(latencies_ms), _pct(latencies_ms, 0.99)

    print(f"devnet: {n} sequential DM sends, Alice -> Bob (streaming), 2 libxmtp clients")
    print(f"  throughput            {n / total:8.0f} messages/s (first send to last arrival)")
    print(f"  send -> stream        p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    print(f"  libxmtp per message   {libxmtp_us:8.0f} us wall (send_text, sequential)")
    print(f"  libxmtp CPU           {libxmtp_cpu_us:8.0f} us per message (both clients)")
    print(f"  node SendGroupMessages{send_ns / max(send_calls, 1) / us:8.0f} us per call")
    print(f"  node stream delivery  {delivery_ns / max(deliveries, 1) / us:8.0f} us per delivery")
    print(f"  node server time      {node_us:8.0f} us per message, every RPC:")
    for method, (c, ns) in sorted(calls.items(), key=lambda kv: -kv[1][1]):
        if c:
            name = method.rsplit("/", 1)[1]
            print(f"      {name:24} {c:6d} calls {ns / c / us:7.0f} us each")
    print(f"  node process CPU      {node_cpu_us:8.0f} us per message (all threads)")
    print(
        f"  libxmtp/node          {libxmtp_us / node_us:8.1f}x wall per message / server time"
        f"; {libxmtp_cpu_us / node_cpu_us:.1f}x CPU / CPU (goal >= 5x)"
    )
    print("node alone: CPU per call, raw gRPC client, 2000 sequential calls each")
    for name, cpu_us in alone.items():
        ratio = libxmtp_cpu_us / cpu_us
        print(f"      {name:42} {cpu_us:6.0f} us  (libxmtp CPU per message: {ratio:.1f}x)")
    delivery = alone["SendGroupMessages + its delivery"] - alone["SendGroupMessages, no subscriber"]
    print(f"      so a streamed delivery adds about {delivery:.0f} us (a difference; noisy)")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench devnet", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--messages", type=int, default=1000, help="messages (default 1000)")
    args = parser.parse_args(argv)
    asyncio.run(run(args.messages))
