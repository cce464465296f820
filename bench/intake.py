"""Intake: a burst of new conversations arriving while cone runs, against raw libxmtp.

    python -m bench intake [--conversations 500] [--peers 10] [--inflight 4]
                           [--no-baseline] [--cone-src DIR]

One `cone devnet` subprocess (in memory) serves every client; `cone daemon` runs as a
subprocess at its production catch-up pace; the peers (real libxmtp clients) share
the bench process. The peers make `--conversations` new conversations with a
receiver as fast as they can (each peer its DM first, then groups, `--inflight` at a
time), each with one first text, and the bench times, per conversation, from the
`send_text` of its first message until the receiver has taken it in:

- **cone** (the daemon, its inbox fresh): taken in once cone's store holds the
  conversation and its first message, committed. The senders are unknown to cone, so
  each conversation is held as a request (docs/methods.md, `requests`): accepting it
  lets `receive` return the message at once, with no network call. The bench sees the
  commit by polling cone's store read-only every 25 ms (WAL: it never holds back the
  daemon's writes), because `requests` looks up each sender's address in libxmtp and
  polling it would load the daemon it measures; at the end `requests` must list every
  conversation with its message pending.
- **raw libxmtp** (the baseline: a new inbox registered the same way, in a process of
  its own, `bench/_rawreceiver.py`, so that its work does not slow the peers): its
  message and conversation streams open and `sync_all_conversations` after each
  burst of new conversations and every 5 s. Taken in once its stream or its listing
  hands over the first message.

The two bursts run one after the other with the same peers (raw first;
`--no-baseline`: cone alone). Reported per side: the rate (conversations per second,
from the first creation to the last taken in), p50/p95 latency, and the ratio of
cone's rate to raw's. `--cone-src` runs the daemon from another checkout's `cone/`
(a "before" run of the same bench).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from xmtp_bindings import xmtpv3 as ffi

from cone.config import STORE_NAME
from cone.store._db import open_database
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, short_home
from support.devnet_process import DevnetProcess
from support.peers import Peer, plain_group_options
from support.state import store_key

ROOT = Path(__file__).resolve().parent.parent
# The daemon's default catch-up period (tests shorten it to 2 s).
PRODUCTION_PACE = {"CONE_CATCHUP_S": "30"}
POLL_S = 0.025
# How long a side may take to take in a whole burst before the bench gives up on it.
TAKE_IN_S = 1800.0


def percentile_ms(xs: list[float], p: float) -> float:
    """The `p` quantile of `xs` (seconds), in milliseconds."""
    return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1000


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Burst:
    """One burst: when each conversation's first message was published, and when the
    receiver took it in (bench clock, seconds)."""

    started: float = 0.0
    published: dict[str, float] = field(default_factory=dict)
    taken: dict[str, float] = field(default_factory=dict)

    def take(self, cid: str) -> None:
        self.taken.setdefault(cid, time.monotonic())

    def complete(self) -> bool:
        return len(self.published) > 0 and set(self.published) <= set(self.taken)

    def made_s(self) -> float:
        """From the first creation to the last first message published."""
        return max(self.published.values()) - self.started

    def took_s(self) -> float:
        """From the first creation to the last conversation taken in."""
        return max(self.taken[c] for c in self.published) - self.started

    def latencies(self) -> list[float]:
        """Each conversation's first message, published to taken in (seconds)."""
        return [max(0.0, self.taken[c] - t) for c, t in self.published.items()]

    def summary(self, name: str) -> tuple[str, float]:
        took, made, lat = self.took_s(), self.made_s(), self.latencies()
        rate = len(self.published) / took
        return (
            f"{name}: {rate:.1f} conversations/s ({len(self.published)} in {took:.1f} s; "
            f"the peers made them in {made:.1f} s), latency p50 {percentile_ms(lat, 0.5):.0f} ms, "
            f"p95 {percentile_ms(lat, 0.95):.0f} ms, max {percentile_ms(lat, 1.0):.0f} ms",
            rate,
        )


async def _make(peers: list[Peer], inbox_id: str, n: int, inflight: int, burst: Burst) -> None:
    """The peers make `n` conversations with `inbox_id` (each peer its DM first), one
    first text in each, `inflight` at a time per peer, all peers at once."""
    shares = [n // len(peers) + (i < n % len(peers)) for i in range(len(peers))]
    counter = itertools.count()

    async def one(peer: Peer, dm: bool) -> None:
        convs = peer.client.conversations()
        if dm:
            conv = await convs.find_or_create_dm(
                inbox_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
            )
        else:
            conv = await convs.create_group([inbox_id], plain_group_options())
        sending = time.monotonic()  # a receiver may see it before send_text returns
        await conv.send_text(f"first message {next(counter)}")
        burst.published[bytes(conv.id()).hex()] = sending

    async def lane(peer: Peer, jobs: list[bool]) -> None:
        while jobs:
            await one(peer, jobs.pop(0))

    async def peer_burst(peer: Peer, share: int) -> None:
        if share == 0:
            return
        await one(peer, True)  # the DM first: the other lanes would race to make it
        jobs = [False] * (share - 1)
        await asyncio.gather(*(lane(peer, jobs) for _ in range(inflight)))

    burst.started = time.monotonic()
    await asyncio.gather(*(peer_burst(p, s) for p, s in zip(peers, shares, strict=True)))


async def _wait(burst: Burst, n: int, what: str) -> None:
    deadline = time.monotonic() + TAKE_IN_S
    shown = time.monotonic()
    while not (len(burst.published) == n and burst.complete()):
        if time.monotonic() - shown > 10:
            shown = time.monotonic()
            print(f"  {what}: {len(burst.published)} made, {len(burst.taken)} taken in")
        if time.monotonic() > deadline:
            missing = len(set(burst.published) - set(burst.taken)) + n - len(burst.published)
            raise TimeoutError(f"{what}: {missing} conversations not taken in")
        await asyncio.sleep(POLL_S)


# --- cone -------------------------------------------------------------------------


def _new_rows(conn: Any, after: int) -> list[tuple[int, str]]:
    rows: list[tuple[int, str]] = conn.execute(
        "SELECT seq, conversation_id FROM messages WHERE seq > ? ORDER BY seq", (after,)
    ).fetchall()
    return rows


def _open_watch(home: Path) -> tuple[Any, int]:
    """cone's store, read-only, and the inbox's sequence now: where a watch starts."""
    conn = open_database(home / STORE_NAME, store_key(home))
    conn.execute("PRAGMA query_only = ON")
    (last,) = conn.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()
    return conn, int(last)


async def _watch_store(conn: Any, last: int, burst: Burst, stop: asyncio.Event) -> None:
    """Poll cone's store for conversations given a message past sequence `last` (a
    big store's older messages are never read); closes `conn` when stopped."""
    try:
        while not stop.is_set():
            for seq, cid in await asyncio.to_thread(_new_rows, conn, last):
                burst.take(cid)
                last = seq
            await asyncio.sleep(POLL_S)
    finally:
        conn.close()


async def cone_side(
    d: DaemonProcess, peers: list[Peer], n: int, inflight: int
) -> tuple[Burst, float]:
    """The peers' burst of `n` new conversations into the daemon `d`: when each was
    taken in, and the daemon's CPU over the burst. Every one must end up listed as a
    request with its message pending."""
    inbox_id = (await d.client.identity()).inbox_id
    assert d.proc is not None
    burst = Burst()
    # The watch starts before the burst does: opening the store derives its key, and
    # a first message committed meanwhile would lie below its starting point.
    conn, last = await asyncio.to_thread(_open_watch, d.home)
    stop = asyncio.Event()
    watcher = asyncio.create_task(_watch_store(conn, last, burst, stop))
    cpu = _cpu_s(d.proc.pid)
    try:
        await asyncio.gather(_make(peers, inbox_id, n, inflight, burst), _wait(burst, n, "cone"))
    finally:
        stop.set()
        await watcher
    cpu = _cpu_s(d.proc.pid) - cpu
    requests = await d.client.call("Requests", pb.RequestsRequest())
    held = {r.conversation_id: r.pending_messages for r in requests.requests}
    missing = [c for c in burst.published if held.get(c, 0) < 1]
    assert not missing, f"{len(missing)} conversations not listed as requests with a message"
    return burst, cpu


# --- raw libxmtp ------------------------------------------------------------------


async def _raw_side(url: str, work: Path, peers: list[Peer], n: int, inflight: int) -> Burst:
    """The baseline receiver in a process of its own (bench/_rawreceiver.py)."""
    with (work / "raw.log").open("wb") as stderr:  # libxmtp logs its errors there
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench._rawreceiver", url, str(work),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=stderr, cwd=ROOT,
        )  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    burst = Burst()
    try:
        inbox_id = ""
        while not inbox_id:  # libxmtp writes its log lines there too
            line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
            assert line, "the raw receiver did not start"
            if line.startswith("inbox "):
                inbox_id = line.split()[1]

        async def read() -> None:
            assert proc.stdout is not None
            async for line in proc.stdout:
                if line.startswith(b"taken "):
                    _, cid, at = line.decode().split()
                    burst.taken.setdefault(cid, float(at))

        reader = asyncio.create_task(read())
        await asyncio.gather(
            _make(peers, inbox_id, n, inflight, burst), _wait(burst, n, "raw libxmtp")
        )
    finally:
        proc.stdin.close()
        await proc.wait()
    await reader
    return burst


# --- the run ----------------------------------------------------------------------


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="cone-intake-"))
    devnet = await DevnetProcess.start(work)
    env = dict(PRODUCTION_PACE)
    if args.cone_src:
        env["PYTHONPATH"] = args.cone_src
    try:
        peers = [await Peer.create(devnet.url, work, f"peer{i}") for i in range(args.peers)]
        async with DaemonProcess(short_home(), devnet.url, env) as d:
            print(f"load before: {os.getloadavg()[0]:.2f}")
            raw_rate = None
            if not args.no_baseline:
                raw = await _raw_side(devnet.url, work, peers, args.conversations, args.inflight)
                line, raw_rate = raw.summary("raw libxmtp")
                print(line)
            cone_burst, cpu = await cone_side(d, peers, args.conversations, args.inflight)
            line, cone_rate = cone_burst.summary("cone")
            print(f"{line}; daemon CPU {cpu:.1f} s")
            if raw_rate is not None:
                print(f"ratio cone/raw: {cone_rate / raw_rate:.2f}x")
            print(f"load after: {os.getloadavg()[0]:.2f}")
        for p in peers:
            p.close()
    finally:
        devnet.process.terminate()
        await devnet.process.wait()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench intake")
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--peers", type=int, default=10)
    parser.add_argument("--inflight", type=int, default=4, help="per peer")
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="cone alone (the raw receiver's syncs grow slow past 1,000 conversations)",
    )
    parser.add_argument("--cone-src", help="a checkout whose cone/ the daemon runs")
    args = parser.parse_args(argv)
    if args.cone_src:
        args.cone_src = str(Path(args.cone_src).resolve())
    asyncio.run(run(args))
