"""Bridge turn overhead: a peer's message to the command's start, and the command's exit
to the reply at the peer, against raw libxmtp peers on the same devnet.

    python -m bench bridge [--turns 200] [--concurrency 4] [--idle-ms 50]

A raw libxmtp peer DMs an agent under `cone bridge` (a subprocess hosting the core)
and waits for each reply before sending the next message. The agent is a shell script
that stamps its first and last line with `date +%s%N`; the peer stamps the moment it
starts sending and the moment its stream callback sees the reply (same clock).

- inbound: peer starts `send` → the command starts. Baseline: the same message
  to a second raw peer, until its stream callback fires.
- outbound: the command exits → the reply arrives at the peer. Baseline: the second
  raw peer starts sending a reply → it arrives at the first.
- for the split of the inbound leg: a long poll on another consumer of the agent's
  cone stamps when each message becomes receivable (ingested and committed).

The peer sends each message the moment the previous reply arrives (back to back),
which is before the bridge's Reply call has returned (the turn is acknowledged in
that call, with the reply's claim): the conversation is still left out of the
bridge's long poll then, so that leg includes the end of the previous turn. Every
other turn the peer first waits `--idle-ms` (the bridge idle, as when a person
types), and those turns are reported on their own rows. The baseline is paced the
same way, and each kind of turn is compared with its own: on this 2-vCPU guest a
raw client's stream sees a message in about 3 ms when its threads have just worked
(the ping-pong) and about 5 ms after 50 ms idle (halted vCPUs wake slowly).

The difference is what cone adds: the daemon's stream, ingest and commit, the long
poll, turn forming, the journal's fsync and the spawn on the way in; the Reply into the
durable outbox with the turn's acknowledgement, its publication and the journal on the
way out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from xmtp_bindings import xmtpv3 as ffi

from bench._against_sdk import figures_only
from cone.devnet import Devnet
from cone.engine import _client
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, short_home
from support.peers import Peer, text_of

AGENT = """#!/bin/sh
echo "start $CONE_TURN_ID $(date +%s%N)" >> "$1"
echo "pong"
echo "end $CONE_TURN_ID $(date +%s%N)" >> "$1"
"""


class _Stamps(ffi.FfiMessageCallback):
    """A stream callback that stamps each text from another inbox on libxmtp's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, own: str) -> None:
        self.loop = loop
        self.own = own
        self.queue: asyncio.Queue[tuple[int, str, bytes]] = asyncio.Queue()

    def on_message(self, message: Any) -> None:
        t = time.time_ns()
        text = text_of(message)
        if text is not None and message.sender_inbox_id != self.own:
            item = (t, text, bytes(message.conversation_id))
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def on_error(self, error: Any) -> None:
        pass

    def on_close(self) -> None:
        pass


async def _stream(peer: Peer) -> tuple[_Stamps, Any]:
    stamps = _Stamps(asyncio.get_running_loop(), peer.inbox_id)
    closer = await peer.client.conversations().stream_all_messages(stamps, None)
    await closer.wait_for_ready()
    return stamps, closer


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _row(name: str, values: list[float]) -> str:
    return f"| {name:<46} | {_pct(values, 0.5):7.1f} | {_pct(values, 0.99):7.1f} |"


async def _bridge_run(
    url: str, work: Path, turns: int, concurrency: int, idle_s: float
) -> dict[str, list[float]]:
    log = work / "agent.log"
    script = work / "agent.sh"
    script.write_text(AGENT)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    home = short_home()
    alice = await Peer.create(url, work, "alice")

    class Bridge(DaemonProcess):
        def args(self) -> list[str]:
            return [
                "bridge", "--home", str(self.home), "--api-url", self.api_url,
                "--concurrency", str(concurrency), "--", str(script), str(log),
            ]  # fmt: skip

    inbound: list[float] = []
    outbound: list[float] = []
    received_by_cone: list[float] = []
    idle_inbound: list[float] = []
    idle_received: list[float] = []
    try:
        # The production catch-up pace (30 s), not the tests' 2 s.
        async with Bridge(home, url, extra_env={"CONE_CATCHUP_S": "30"}) as bridge:
            ident = await bridge.client.identity()
            dm = await alice.client.conversations().find_or_create_dm_by_identity(
                _client.identifier(ident.address),
                ffi.FfiCreateDmOptions(message_disappearing_settings=None),
            )
            stamps, closer = await _stream(alice)
            await alice.send(dm, "warm-up")
            cid = bytes(dm.id()).hex()
            while True:
                reqs = (await bridge.client.call("Requests", pb.RequestsRequest())).requests
                if any(r.conversation_id == cid for r in reqs):
                    break
                await asyncio.sleep(0.05)
            await bridge.client.call("Accept", pb.AcceptRequest(conversation_id=cid))
            await asyncio.wait_for(stamps.queue.get(), 60)  # the warm-up's reply
            seen: dict[str, int] = {}
            observer = asyncio.create_task(_observe(bridge.client, seen))
            for i in range(turns):
                idle = i % 2 == 1
                if idle:
                    await asyncio.sleep(idle_s)  # pacing, as a person's typing would
                sent = time.time_ns()
                message_id = bytes(await alice.send(dm, f"ping {i}")).hex()
                received, _, _ = await asyncio.wait_for(stamps.queue.get(), 60)
                marks = {}
                for line in log.read_text().splitlines():
                    what, turn, ns = line.split()
                    if turn == message_id:
                        marks[what] = int(ns)
                (idle_inbound if idle else inbound).append((marks["start"] - sent) / 1e6)
                outbound.append((received - marks["end"]) / 1e6)
                if message_id in seen:
                    at = (seen[message_id] - sent) / 1e6
                    (idle_received if idle else received_by_cone).append(at)
            observer.cancel()
            await closer.end_and_wait()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return {
        "inbound": inbound,
        "outbound": outbound,
        "received": received_by_cone,
        "idle_inbound": idle_inbound,
        "idle_received": idle_received,
    }


async def _observe(client: Any, seen: dict[str, int]) -> None:
    """Long-poll another consumer: when each message becomes receivable in cone."""
    while True:
        batch = await client.receive(consumer="bench-observer", limit=1000, wait_ms=30_000)
        now = time.time_ns()
        for m in batch.messages:
            seen.setdefault(m.message_id, now)
        if batch.messages:
            await client.ack([m.message_id for m in batch.messages], consumer="bench-observer")


async def _baseline_run(url: str, work: Path, turns: int, idle_s: float) -> dict[str, list[float]]:
    alice = await Peer.create(url, work, "alice2")
    bob = await Peer.create(url, work, "bob2")
    dm = await alice.dm_with(bob)
    await alice.send(dm, "warm-up")
    await bob.sync()
    bob_dm = bob.conversation(bytes(dm.id()))
    a_stamps, a_closer = await _stream(alice)
    b_stamps, b_closer = await _stream(bob)
    inbound: list[float] = []
    idle_inbound: list[float] = []
    outbound: list[float] = []
    for i in range(turns):
        idle = i % 2 == 1
        if idle:
            await asyncio.sleep(idle_s)  # paced as the bridge's run is
        sent = time.time_ns()
        await alice.send(dm, f"ping {i}")
        arrived, _, _ = await asyncio.wait_for(b_stamps.queue.get(), 60)
        reply_sent = time.time_ns()
        await bob.send(bob_dm, "pong")
        back, _, _ = await asyncio.wait_for(a_stamps.queue.get(), 60)
        (idle_inbound if idle else inbound).append((arrived - sent) / 1e6)
        outbound.append((back - reply_sent) / 1e6)
    await a_closer.end_and_wait()
    await b_closer.end_and_wait()
    return {"inbound": inbound, "idle_inbound": idle_inbound, "outbound": outbound}


async def _main(turns: int, concurrency: int, idle_s: float) -> None:
    work = Path(tempfile.mkdtemp(prefix="cone-bench-"))
    try:
        async with Devnet(port=0) as url:
            base = await _baseline_run(url, work, turns, idle_s)
            cone = await _bridge_run(url, work, turns, concurrency, idle_s)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"bridge turn overhead: {turns} sequential turns on an in-process devnet (ms)\n")
    print("| leg                                            |     p50 |     p99 |")
    print("| ---------------------------------------------- | ------- | ------- |")
    idle_ms = round(idle_s * 1000)
    print(_row("peer message → command start (back to back)", cone["inbound"]))
    print(_row("  of which: peer message → receivable in cone", cone["received"]))
    print(_row(f"peer message → command start ({idle_ms} ms idle)", cone["idle_inbound"]))
    print(_row("  of which: peer message → receivable in cone", cone["idle_received"]))
    print(_row("baseline: peer message → raw peer's stream", base["inbound"]))
    print(_row(f"baseline: the same, {idle_ms} ms idle", base["idle_inbound"]))
    print(_row("command exit → reply at the peer (cone bridge)", cone["outbound"]))
    print(_row("baseline: raw peer's send → peer's stream", base["outbound"]))
    added_in = _pct(cone["inbound"], 0.5) - _pct(base["inbound"], 0.5)
    added_idle = _pct(cone["idle_inbound"], 0.5) - _pct(base["idle_inbound"], 0.5)
    added_out = _pct(cone["outbound"], 0.5) - _pct(base["outbound"], 0.5)
    print(
        f"\ncone adds at p50: {added_in:.1f} ms inbound back to back, {added_idle:.1f} ms "
        f"inbound to an idle bridge, {added_out:.1f} ms outbound"
    )
    for name, leg, cut in (
        ("back to back", "inbound", "received"),
        ("idle", "idle_inbound", "idle_received"),
    ):
        own = _pct(cone[leg], 0.5) - _pct(cone[cut], 0.5)
        ratio = _pct(cone[cut], 0.5) / _pct(base[leg], 0.5)
        print(
            f"{name}: receivable at {ratio:.2f}x the raw stream's p50; the bridge's own "
            f"part (command start - receivable, p50s) {own:.1f} ms"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"({os.cpu_count()} CPUs, load {load:.1f}, Python {sys.version.split()[0]})")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench bridge")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--idle-ms", type=int, default=50)
    args = parser.parse_args(argv)
    figures_only(lambda: asyncio.run(_main(args.turns, args.concurrency, args.idle_ms / 1000)))
