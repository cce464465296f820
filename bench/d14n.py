"""D14N against V3 in the same run: the devnet's cost per call and per message, and
cone's send and ingest rates on each API.

    python -m bench d14n [--calls 2000] [--messages 500] [--sends 200] [--ingest 500]

One `cone devnet` subprocess (in memory) serves both APIs on one port. Reported,
each D14N figure beside its V3 baseline and the ratio D14N / V3:

- the node alone, a raw gRPC client making sequential calls: the node's CPU per
  publication (`PublishClientEnvelopes` of one group message against V3's
  `SendGroupMessages`) and per query of a 10-message group (`QueryEnvelopes`
  against `QueryGroupMessages`);
- two raw libxmtp clients, Alice sending N texts to Bob in a DM one after another
  (Bob not streaming), on each API: the wall time of a send and the node's
  process CPU per message (every call the message caused);
- cone: N sequential `Send`s to a raw peer, and M texts from a raw peer into a
  group with cone until all are in its durable inbox, with a daemon started with
  `--gateway-url` set to the devnet's URL (D14N) against one without (V3); each
  daemon's peers speak the same API as it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import ControlClient, topics
from conepb.v1 import cone_pb2 as pb
from conepb.xmtpv4 import envelopes_pb2 as env
from conepb.xmtpv4 import message_api_pb2 as msg
from conepb.xmtpv4 import message_api_pb2_grpc as msg_grpc
from conepb.xmtpv4 import payer_api_pb2 as payer
from conepb.xmtpv4 import payer_api_pb2_grpc as payer_grpc
from support import mls as mls_bytes
from support import wire
from support.daemons import DaemonProcess, short_home
from support.devnet_process import DevnetProcess
from support.peers import Peer
from support.waiting import until

# The daemon's default catch-up period (tests shorten it to 2 s).
PRODUCTION_PACE = {"CONE_CATCHUP_S": "30"}
MODES = ("v3", "d14n")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _envelope(group: bytes) -> env.ClientEnvelope:
    envelope = env.ClientEnvelope(group_message=wire.group_input(mls_bytes.private_message(group)))
    envelope.aad.target_topic = topics.topic(topics.KIND_GROUP_MESSAGES, group)
    return envelope


async def node_alone(url: str, pid: int, n: int) -> dict[str, float]:
    """The node's CPU (us) per call of each kind, from sequential raw calls."""
    out: dict[str, float] = {}
    async with wire.node(url) as v3:
        gateway = payer_grpc.PayerApiStub(v3.channel)
        replication = msg_grpc.ReplicationApiStub(v3.channel)
        group = os.urandom(16)
        await wire.send(v3, group, 10)
        query = msg.EnvelopesQuery(topics=[topics.topic(topics.KIND_GROUP_MESSAGES, group)])

        async def per_call(name: str, call: Callable[[], Awaitable[object]]) -> None:
            await call()
            start = _cpu_s(pid)
            for _ in range(n):
                await call()
            cost = (_cpu_s(pid) - start) / n * 1e6
            out[name] = min(cost, out.get(name, cost))

        quiet = os.urandom(16)
        for _ in range(2):  # two rounds, interleaved; the lower of each is kept
            await per_call("v3 publish", lambda: wire.send(v3, quiet))
            await per_call(
                "d14n publish",
                lambda: gateway.PublishClientEnvelopes(
                    payer.PublishClientEnvelopesRequest(envelopes=[_envelope(quiet)])
                ),
            )
            await per_call("v3 query", lambda: wire.query(v3, group, limit=10))
            await per_call(
                "d14n query",
                lambda: replication.QueryEnvelopes(
                    msg.QueryEnvelopesRequest(query=query, limit=10)
                ),
            )
    return out


def _calls(ctl: ControlClient) -> Counter[str]:
    return Counter({m.method.rsplit("/", 1)[1]: m.calls for m in ctl.stats().methods})


async def libxmtp_dm(
    url: str, pid: int, ctl: ControlClient, work: Path, n: int, mode: str
) -> tuple[float, float, dict[str, float]]:
    """Per message: a raw sequential send's wall time (us), the node's CPU (us), and
    the node's calls by method."""
    d14n = mode == "d14n"
    alice = await Peer.create(url, work, f"alice-{mode}", d14n=d14n)
    bob = await Peer.create(url, work, f"bob-{mode}", d14n=d14n)
    dm = await alice.dm_with(bob)
    for i in range(10):
        await alice.send(dm, f"warmup {i}")
    cpu, calls = _cpu_s(pid), _calls(ctl)
    start = time.perf_counter()
    for i in range(n):
        await alice.send(dm, f"m{i}")
    wall = time.perf_counter() - start
    node_cpu = _cpu_s(pid) - cpu
    per_message = {m: c / n for m, c in (_calls(ctl) - calls).items()}
    return wall / n * 1e6, node_cpu / n * 1e6, per_message


def _daemon(url: str, mode: str) -> DaemonProcess:
    return DaemonProcess(
        short_home(), url, PRODUCTION_PACE, gateway_url=url if mode == "d14n" else None
    )


async def cone_send(url: str, work: Path, n: int, mode: str) -> float:
    """cone's sequential Sends per second to a raw peer."""
    async with _daemon(url, mode) as d:
        peer = await Peer.create(url, work, f"target-{mode}", d14n=mode == "d14n")
        contact = (await d.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
        start = time.perf_counter()
        for i in range(n):
            r = await d.client.call(
                "Send", pb.SendRequest(to=contact.conversation_id, text=f"cone {i}", key=f"b{i}")
            )
            assert r.published
        elapsed = time.perf_counter() - start
    return n / elapsed


async def cone_ingest(url: str, work: Path, m: int, mode: str) -> tuple[float, float]:
    """A raw peer's texts into a group with cone: (messages/s into cone's durable
    inbox, the sender's own rate)."""
    async with _daemon(url, mode) as d:
        ident = await d.client.identity()
        sender = await Peer.create(url, work, f"sender-{mode}", d14n=mode == "d14n")
        opts = ffi.FfiCreateGroupOptions(
            permissions=None, group_name=None, group_image_url_square=None, group_description=None,
            custom_permission_policy_set=None, message_disappearing_settings=None, app_data=None,
        )  # fmt: skip
        group = await sender.client.conversations().create_group([ident.inbox_id], opts)
        gid = bytes(group.id()).hex()

        async def requested() -> bool:
            return bool((await d.client.call("Requests", pb.RequestsRequest())).requests)

        await until(requested, timeout=60)
        await d.client.call("Accept", pb.AcceptRequest(conversation_id=gid))
        start = time.perf_counter()
        for i in range(m):
            await sender.send(group, f"ingest {i}")
        sent = time.perf_counter()

        async def ingested() -> bool:
            status = await d.client.call("Status", pb.StatusRequest())
            return bool(status.inbox_messages >= m)

        await until(ingested, timeout=300)
        done = time.perf_counter()
    return m / (done - start), m / (sent - start)


def _row(what: str, v3: float, d14n: float, unit: str) -> None:
    print(f"  {what:44} V3 {v3:8.0f} {unit:6}  D14N {d14n:8.0f} {unit:6}  D14N/V3 {d14n / v3:.2f}")


async def run(args: argparse.Namespace) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores)")
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        node = await DevnetProcess.start(work, "--control", str(work / "ctl.sock"))
        ctl = ControlClient(work / "ctl.sock")
        try:
            pid = node.process.pid
            alone = await node_alone(node.url, pid, args.calls)
            dm = {
                mode: await libxmtp_dm(node.url, pid, ctl, work, args.messages, mode)
                for mode in MODES
            }
            send = {mode: await cone_send(node.url, work, args.sends, mode) for mode in MODES}
            ingest = {mode: await cone_ingest(node.url, work, args.ingest, mode) for mode in MODES}
        finally:
            ctl.close()
            await node.stop()
    print(f"node alone: CPU per call, raw gRPC client, {args.calls} sequential calls, best of 2")
    _row("publish one group message", alone["v3 publish"], alone["d14n publish"], "us")
    _row("query a 10-message group", alone["v3 query"], alone["d14n query"], "us")
    print(f"two raw libxmtp 1.10 clients, {args.messages} sequential DM sends")
    _row("send wall time per message", dm["v3"][0], dm["d14n"][0], "us")
    _row("node CPU per message (all its calls)", dm["v3"][1], dm["d14n"][1], "us")
    for mode in MODES:
        calls = ", ".join(
            f"{m} {c:.2f}" for m, c in sorted(dm[mode][2].items(), key=lambda x: -x[1])
        )
        print(f"    node calls per message, {mode}: {calls}")
    print("cone daemon (--gateway-url = the devnet's URL for D14N), peers on the same API")
    _row(f"sequential Send, {args.sends}", send["v3"], send["d14n"], "/s")
    _row(
        f"ingest {args.ingest} into the durable inbox", ingest["v3"][0], ingest["d14n"][0], "msg/s"
    )
    _row("… the raw sender's own rate", ingest["v3"][1], ingest["d14n"][1], "msg/s")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench d14n", description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="raw calls per kind")
    parser.add_argument("--messages", type=int, default=500, help="raw libxmtp DM sends")
    parser.add_argument("--sends", type=int, default=200, help="cone Sends")
    parser.add_argument("--ingest", type=int, default=500, help="texts into cone")
    asyncio.run(run(parser.parse_args(argv)))
