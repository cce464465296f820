"""Big store benchmarks: a daemon over 10,000 conversations and up to 1,000,000 messages.

    python -m bench bigstore [--conversations 10000] [--messages 100000,1000000]
                             [--cache DIR] [--active 1000] [--idle-s 90] [--intake 500]
                             [--start-only]

The stores are made by `bench/_bigstore.py` (real conversations on a devnet kept in
SQLite, then stored messages written into libxmtp's and cone's databases; see its
docstring for what differs from real traffic) and cached in DIR between runs. Each
size runs on a fresh copy of its cached store, in one run, so the figures of the
sizes compare with each other (the growth), on the same machine load:

- index: before the start, cone's index in libxmtp's database is made on the copy, as
  the daemon's first start under this libxmtp build makes it (once:
  cone/engine/_cursor_index.py), timed apart, so that the start below is any later
  start's.
- start: the daemon's process started until its first `receive` is answered (from
  the store, while the start's read and first sync run: `stale`), and until that
  first sync is done (its log line, with the read / streams / sync parts, and how
  long the read's libxmtp conversation listing took); then how long the full
  reconciliation runs in the background, and how many messages it compared and
  healed. `--start-only` goes on to the restart only.
- receive while reconciling: `receive` (limit 100, no wait) during the
  reconciliation against the same after it (p50, and the ratio).
- idle: the daemon's CPU over `--idle-s` seconds once the reconciliation is done and
  nothing arrives (the catch-up's periods: its sync, the window check over a turn of
  the conversations, the settings refresh), as seconds of CPU per 30 s (the default
  catch-up interval; a long pass stretches the wait, cone/core/intake/pacing.py); and, from
  the daemon's `-v` lines, its syncs, those libxmtp reported groups synced in, and
  cone's own conversation listings, per 30 s.
- conversations: a `conversations` page (50): the very first, which reads libxmtp's
  details of its groups and keeps them (cone/store/details.py), then the first again
  (p50 of 10); walking 100 pages (5,000 conversations), each listed for the first
  time: p50 and the 100th; and walking them again, from what cone kept.
- drain: receive (1000) + ack of the pending backlog (10,000), in msg/s.
- ingest: the peers send one message into each of `--active` conversations at once
  (ten peers in parallel); time until all are in cone's inbox, against the time the
  peers' raw libxmtp took to publish them (the baseline).
- intake: ten new peers make `--intake` new conversations with cone at once (each
  its DM first, then groups, four at a time, one first text in each: the burst of
  `python -m bench intake`, into the big store); time until cone's store holds every
  one with its message (each is then a request), against the time the peers took
  to make them (the baseline); the latency of each first message, as the bench's
  store watcher saw it and as the daemon's `-v` line stamped its commit (the watcher
  shares its loop with the in-process devnet and the peers); and the daemon's CPU.
  Meanwhile two of the store's own peers send a text every 0.5 s, each into a
  conversation cone accepted long ago: its latency by the daemon's `-v` line
  (libxmtp's message stream takes a new conversation in by subscribing again, and
  reads nothing meanwhile: cone keeps accepted conversations on a stream of their
  own, cone/engine/_subscriptions.py).
- accepting: the daemon accepts 40 of those requests, one a second, while the
  same two peers text accepted conversations every 0.2 s: each text's latency by
  the daemon's `-v` line, and how many took over 0.5 s (libxmtp chooses a stream's
  conversations when it subscribes, so accepting moves conversations between
  streams; subscribing the message stream of 10,000 conversations again takes
  seconds, during which libxmtp hands over nothing), and how long each renewal of
  `messages` took by the daemon's `-v` line. These two phases run last, so
  the memory figures below do not include them.
- restart: last, the daemon stopped and started again: to its first `receive`, to
  its first sync done, and its full reconciliation, which reads each conversation
  from where the first start's pass found cone complete (cone/store/reconciled.py;
  conversations made since, by the phases above, are read whole), with the new
  process's CPU until that pass is done.
- memory: the daemon's resident set (VmRSS) after start and after the
  reconciliation, its peak (VmHWM) before the ingest burst, its resident set right
  after the burst, and its peak over the whole run; and, sampled every 0.5 s, what
  the resident set is made of at the sampled peak (anonymous, and libxmtp's database
  mapped: libxmtp sets `mmap_size` on each connection), and the most descriptors
  (one per connection of libxmtp's pool), mappings and mapped MiB of that database
  at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench import _bigstore, intake
from cone.config import XMTP_DB_NAME
from cone.devnet import Devnet
from cone.engine import _cursor_index
from cone.store import xmtp_database
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.state import xmtp_key
from support.waiting import until

_STARTED = re.compile(
    r"core started in ([\d.]+) s: read ([\d.]+) s, streams ([\d.]+) s, first sync ([\d.]+) s"
)
_WHOLE = re.compile(r"healed \((\d+) conversations read whole\)")
_START_READ = re.compile(r"the start's read (\d+) of \d+\)")
_SKIPPED = re.compile(r"(\d+) with nothing stored since\)")
_LISTED = re.compile(r"listed \d+ conversations in ([\d.]+) s")
_DONE = re.compile(
    r"full reconciliation done in ([\d.]+) s: (\d+) conversations, (\d+) messages compared, (\d+) healed"
)

# The daemon's `-v` lines: each sync (with libxmtp's count of groups synced) and each
# conversation listing cone takes.
_SYNCED = re.compile(r"synced in \d+ ms \((?:libxmtp synced (\d+) of \d+|no summary)")
_LISTING = re.compile(r"conversation listing: \d+ in ")
_RENEWED = re.compile(r"DEBUG \S+: stream (\S+) renewed in ([0-9.]+) s", re.MULTILINE)
_ARRIVED = re.compile(r"^(\S+Z) DEBUG \S+: message in \S+ in ([0-9a-f]+) from", re.MULTILINE)
# The intake phase: new peers, each making its share of the new conversations.
INTAKE_PEERS = 10
INTAKE_INFLIGHT = 4
# The store's own peers that send into accepted conversations during the intake.
KNOWN_PEERS = 2
KNOWN_EVERY_S = 0.5
# The accepting phase: requests accepted one a second (past `RECENT_LIMIT`, so that
# the message stream subscribes again once), while the store's peers text.
ACCEPTS = 40
ACCEPT_EVERY_S = 1.0
ACCEPTING_TEXT_EVERY_S = 0.2
SLOW_S = 0.5


class _VerboseDaemon(DaemonProcess):
    """The daemon with `-v`: its sync and listing lines are what the idle phase counts."""

    def args(self) -> list[str]:
        return [*super().args(), "-v"]


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _memory(pid: int) -> dict[str, float]:
    """What the resident set is made of: anonymous vs file-backed (status), the part of
    it that maps libxmtp's database (smaps), and how many descriptors the process holds
    on that database (a connection of libxmtp's pool holds one each)."""
    out = {k: _kib(pid, k) / 1024 for k in ("VmRSS", "RssAnon", "RssFile")}
    db_maps = db_rss = 0
    on_db = False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if "-" in head[0] and not head[0].endswith(":"):
            on_db = len(head) == 6 and head[5].endswith("xmtp.db3")
            db_maps += on_db
        elif on_db and head[0] == "Rss:":
            db_rss += int(head[1])
    out["db_maps"], out["db_map_mib"] = db_maps, db_rss / 1024
    fds = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            fds.append(os.readlink(fd))
        except OSError:
            continue
    out["db_fds"] = sum(1 for f in fds if f.endswith("xmtp.db3"))
    out["fds"] = len(fds)
    return out


class _MemorySampler:
    """Samples `_memory` every half second; keeps the sample at the resident set's peak."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak: dict[str, float] = {}
        self.most = {"db_fds": 0.0, "db_maps": 0.0, "db_map_mib": 0.0}
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                m = await asyncio.to_thread(_memory, self.pid)
            except (OSError, ValueError):
                return
            for k in self.most:
                self.most[k] = max(self.most[k], m[k])
            if m["VmRSS"] >= self.peak.get("VmRSS", 0):
                self.peak = {**m, "at": round(time.time(), 1)}
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def _cpu_s(pid: int) -> float:
    """The process's CPU time so far (user + system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _phase(name: str) -> None:
    """A phase's start on stdout, with the wall-clock time (to line up with the daemon's log)."""
    print(f"  phase {name} at {time.time():.1f}", flush=True)


async def _p50(call: Callable[[], Awaitable[Any]], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        await call()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


async def run_size(
    layout: _bigstore.Layout,
    n_messages: int,
    active: int,
    work: Path,
    idle_s: float,
    new_conversations: int,
    start_only: bool = False,
) -> dict[str, float]:
    """One size, on a fresh copy of its cached store (with `start_only`, up to the end
    of the full reconciliation)."""
    copy = await asyncio.to_thread(layout.copy_to, work / "run")
    out: dict[str, float] = {"index_s": await asyncio.to_thread(_made_index, copy.home)}
    async with Devnet(port=0, db=copy.devnet_db) as url:
        d = _VerboseDaemon(copy.home, url, _bigstore.PRODUCTION_PACE)
        t0, pid = await _answering(d, out, "start_s")
        print(f"  memory after start: {_memory(pid)}", flush=True)
        sampler = _MemorySampler(pid)
        try:
            out["during_start_receive_ms"] = await _p50(
                lambda: d.client.receive(limit=100, wait_ms=0), 10
            )
            started = await until(
                lambda: asyncio.to_thread(_STARTED.search, d.stderr()), timeout=3600
            )
            out["synced_s"] = time.perf_counter() - t0
            for i, key in enumerate(("core_s", "read_s", "streams_s", "sync_s"), 1):
                out[key] = float(started.group(i))
            out["rss_start_mib"] = _kib(pid, "VmRSS") / 1024
            print(f"  memory after the first sync: {_memory(pid)}", flush=True)
            during = await _p50(lambda: d.client.receive(limit=100, wait_ms=0), 10)
            done = await until(lambda: asyncio.to_thread(_DONE.search, d.stderr()), timeout=3600)
            out["start_cpu_s"] = _cpu_s(pid)
            out["reconcile_s"] = float(done.group(1))
            out["compared"] = int(done.group(3))
            out["healed"] = int(done.group(4))
            out["during_reconcile_receive_ms"] = during
            out["after_reconcile_receive_ms"] = await _p50(
                lambda: d.client.receive(limit=100, wait_ms=0), 10
            )
            out["rss_reconciled_mib"] = _kib(pid, "VmRSS") / 1024
            listed = _LISTED.search(d.stderr())
            if listed is not None:
                out["listing_s"] = float(listed.group(1))
            if not start_only:
                await _after_start(d, out, copy, url, sampler, work, idle_s, active,
                                   new_conversations)  # fmt: skip
            await sampler.stop()  # the memory figures are the first process's
            await _restart(d, out)
        finally:
            await sampler.stop()
            await d.stop()
            lines = [
                x
                for x in d.stderr().splitlines()
                if x[:4].isdigit() and " cone" in x and ": message in " not in x
            ]
            print("\n".join(f"  daemon: {x}" for x in lines[:60]), flush=True)
            d.log.close()
    await asyncio.to_thread(shutil.rmtree, copy.root)
    return out


async def _answering(d: DaemonProcess, out: dict[str, float], key: str) -> tuple[float, int]:
    """Start the daemon; the time until it answers a first `receive` into `out[key]`.
    Returns when the start began (perf_counter) and the process's pid."""
    t0 = time.perf_counter()
    await d.start()
    await d.client.receive(limit=1, wait_ms=0)
    out[key] = time.perf_counter() - t0
    assert d.proc is not None
    return t0, d.proc.pid


def _count(pattern: re.Pattern[str], d: DaemonProcess) -> int:
    return len(pattern.findall(d.stderr()))


async def _restart(d: DaemonProcess, out: dict[str, float]) -> None:
    """Stop the daemon, start it again: the start, and the full reconciliation from
    each conversation's mark, into `out`."""
    _phase("restart")
    starts, passes = _count(_STARTED, d), _count(_DONE, d)
    await d.stop()
    t0, pid = await _answering(d, out, "restart_s")
    await until(lambda: asyncio.to_thread(lambda: _count(_STARTED, d) > starts), timeout=3600)
    out["restart_synced_s"] = time.perf_counter() - t0
    await until(lambda: asyncio.to_thread(lambda: _count(_DONE, d) > passes), timeout=3600)
    out["restart_cpu_s"] = _cpu_s(pid)
    took, _, compared, _ = _DONE.findall(d.stderr())[-1]
    out["restart_reconcile_s"] = float(took)
    out["restart_compared"] = int(compared)
    out["restart_whole"] = int(_WHOLE.findall(d.stderr())[-1])
    out["restart_read_s"] = float(_STARTED.findall(d.stderr())[-1][1])
    # Only the tree that reads libxmtp's newest stamps says these.
    if read := _START_READ.findall(d.stderr()):
        out["restart_start_read"] = int(read[-1])
    if skipped := _SKIPPED.findall(d.stderr()):
        out["restart_skipped"] = int(skipped[-1])


async def _after_start(
    d: DaemonProcess,
    out: dict[str, float],
    copy: _bigstore.Layout,
    url: str,
    sampler: _MemorySampler,
    work: Path,
    idle_s: float,
    active: int,
    new_conversations: int,
) -> None:
    """The phases after the start and the reconciliation, their figures into `out`."""
    assert d.proc is not None
    pid = d.proc.pid
    _phase("idle")
    cpu, seen = _cpu_s(pid), len(d.stderr())
    await asyncio.sleep(idle_s)
    out["idle_cpu_s"] = (_cpu_s(pid) - cpu) * 30 / idle_s
    out.update(_idle_counts(d.stderr()[seen:], idle_s))
    _phase("conversations")
    out.update(await _conversations(d))
    _phase("drain")
    out.update(await _drain(d))
    # The peak so far, then the ingest burst's own (VmHWM only grows).
    out["hwm_before_ingest_mib"] = _kib(pid, "VmHWM") / 1024
    _phase("ingest")
    out.update(await _ingest(d, copy, url, active))
    out["rss_after_ingest_mib"] = _kib(pid, "VmRSS") / 1024
    out["rss_peak_mib"] = _kib(pid, "VmHWM") / 1024
    print(f"  memory at the sampled peak: {sampler.peak}", flush=True)
    out["peak_anon_mib"] = sampler.peak["RssAnon"]
    out["peak_db_map_mib"] = sampler.peak["db_map_mib"]
    out.update({f"most_{k}": v for k, v in sampler.most.items()})
    if new_conversations:
        _phase("intake")
        out.update(await _intake(d, copy, url, work, new_conversations))
        _phase("accepting")
        out.update(await _accepting(d, copy, url))


def _made_index(home: Path) -> float:
    """Make cone's index in libxmtp's database of a stopped daemon, as its start would;
    how long it took."""
    key = xmtp_key(home)
    started = time.perf_counter()
    assert _cursor_index.make(home / XMTP_DB_NAME, key, xmtp_database)
    return time.perf_counter() - started


def _idle_counts(log: str, idle_s: float) -> dict[str, float]:
    """The idle phase's catch-up periods from the daemon's `-v` lines: its syncs, how
    many of them libxmtp reported groups synced in, and cone's listings, per 30 s."""
    syncs = _SYNCED.findall(log)
    per_period = 30 / idle_s
    return {
        "idle_syncs": len(syncs) * per_period,
        "idle_syncs_with_news": sum(1 for s in syncs if s and int(s) > 0) * per_period,
        "idle_listings": len(_LISTING.findall(log)) * per_period,
    }


async def _conversations(d: DaemonProcess) -> dict[str, float]:
    def page(cursor: str | None = None) -> pb.ConversationsRequest:
        return pb.ConversationsRequest(limit=50, cursor=cursor)

    async def walk() -> list[float]:
        times, request = [], page()
        for _ in range(100):
            t = time.perf_counter()
            got = await d.client.call("Conversations", request)
            times.append(time.perf_counter() - t)
            if not got.HasField("cursor"):
                break
            request = page(got.cursor)
        return times

    # cone keeps what it read of libxmtp's details for the next listing
    # (cone/store/details.py): the first listing of a conversation reads libxmtp,
    # a later one reads only cone's store until a group update comes in.
    t = time.perf_counter()
    await d.client.call("Conversations", page())
    cold = time.perf_counter() - t
    first = await _p50(lambda: d.client.call("Conversations", page()), 10)
    deep, again = await walk(), await walk()
    return {
        "conversations_cold_ms": cold * 1000,
        "conversations_first_ms": first,
        "conversations_walk_ms": statistics.median(deep) * 1000,
        "conversations_last_ms": deep[-1] * 1000,
        "conversations_again_ms": statistics.median(again) * 1000,
        "conversations_again_last_ms": again[-1] * 1000,
    }


async def _drain(d: DaemonProcess) -> dict[str, float]:
    start = time.perf_counter()
    drained = 0
    while batch := (await d.client.receive(limit=1000)).messages:
        drained += await d.client.ack([m.message_id for m in batch])
    elapsed = time.perf_counter() - start
    return {"drained": drained, "drain_msg_s": drained / elapsed}


async def _ingest(
    d: DaemonProcess, layout: _bigstore.Layout, url: str, active: int
) -> dict[str, float]:
    keys = layout.peers()
    convs = layout.conversations()
    per_peer = active // len(keys)
    clients = [await k.open(url, layout.peers_dir) for k in keys]
    targets = [
        [c.conversation(bytes.fromhex(cid)) for cid in convs[k.name][:per_peer]]
        for k, c in zip(keys, clients, strict=True)
    ]
    before = (await d.status()).inbox_messages
    n = per_peer * len(keys)

    async def send_all(conversations: list[Any]) -> None:
        for i, conv in enumerate(conversations):
            await conv.send_text(f"active {i}")

    start = time.perf_counter()
    await asyncio.gather(*(send_all(t) for t in targets))
    sent = time.perf_counter() - start

    async def ingested() -> bool:
        return bool((await d.status()).inbox_messages >= before + n)

    await until(ingested, timeout=600)
    took = time.perf_counter() - start
    for c in clients:
        c.release_db_connection()
    return {"active": n, "ingest_sent_s": sent, "ingest_s": took}


async def _known_during(
    layout: _bigstore.Layout, url: str, burst: asyncio.Task[Any], every_s: float
) -> dict[str, float]:
    """Texts into accepted conversations while `burst` runs, one every `every_s`,
    each into a conversation of its own (the last of each peer's: the ingest phase
    took the first); when each was sent, bench clock."""
    keys = layout.peers()[:KNOWN_PEERS]
    convs = layout.conversations()
    clients = [await k.open(url, layout.peers_dir) for k in keys]
    sent: dict[str, float] = {}
    try:
        while not burst.done():
            i = len(sent)
            key, client = keys[i % len(keys)], clients[i % len(keys)]
            cid = convs[key.name][-1 - i // len(keys)]
            at = time.monotonic()
            await client.conversation(bytes.fromhex(cid)).send_text(f"meanwhile {i}")
            sent[cid] = at
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(burst), every_s)
    finally:
        for c in clients:
            c.release_db_connection()
    return sent


async def _intake(
    d: DaemonProcess, layout: _bigstore.Layout, url: str, work: Path, n: int
) -> dict[str, float]:
    # A directory of this run's own: each peer's database has a random key, and the
    # next size's newcomers must not meet this size's files.
    directory = Path(tempfile.mkdtemp(prefix="newcomers-", dir=work))
    peers = [await Peer.create(url, directory, f"new{i}") for i in range(INTAKE_PEERS)]
    wall = time.time() - time.monotonic()  # the daemon's log stamps, on the bench's clock
    made = asyncio.create_task(intake.cone_side(d, peers, n, INTAKE_INFLIGHT))
    try:
        known = await _known_during(layout, url, made, KNOWN_EVERY_S)
        burst, cpu = await made
    finally:
        made.cancel()  # done by now, unless the texts into accepted conversations failed
        for p in peers:
            p.close()
    latencies = burst.latencies()
    # The bench's store watcher shares its loop with the in-process devnet and the
    # peers, all busy during the burst: the daemon's own `-v` line for each first
    # message (written once it is committed) says when it was taken in, without it.
    # A text sent into an accepted conversation at the burst's end may still be on its way.
    meanwhile = list((await _logged(d, known, wall)).values())
    logged: dict[str, float] = {}
    for cid, at in _arrivals(d, wall):
        if cid in burst.published and cid not in logged:
            logged[cid] = max(0.0, at - burst.published[cid])
    assert len(logged) == len(burst.published), "a first message without its `-v` line"
    by_log = list(logged.values())
    return {
        "known": len(meanwhile),
        "known_p50_ms": statistics.median(meanwhile) * 1000,
        "known_max_ms": max(meanwhile) * 1000,
        "intake": n,
        "intake_made_s": burst.made_s(),
        "intake_s": burst.took_s(),
        "intake_p50_ms": statistics.median(latencies) * 1000,
        "intake_p95_ms": intake.percentile_ms(latencies, 0.95),
        "intake_log_p50_ms": statistics.median(by_log) * 1000,
        "intake_log_p95_ms": intake.percentile_ms(by_log, 0.95),
        "intake_cpu_s": cpu,
    }


def _arrivals(d: DaemonProcess, wall: float) -> list[tuple[str, float]]:
    """Each message the daemon's `-v` lines say it took in: its conversation, and when
    (bench clock, given `wall`: the bench's wall clock less its monotonic one)."""
    return [
        (cid, datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - wall)
        for stamp, cid in _ARRIVED.findall(d.stderr())
    ]


async def _logged(d: DaemonProcess, sent: dict[str, float], wall: float) -> dict[str, float]:
    """How long each text of `sent` (conversation: when) took to the daemon's store,
    by its `-v` line; waits for the last ones, which may still be on their way."""
    logged: dict[str, float] = {}

    async def all_logged() -> bool:
        for cid, at in _arrivals(d, wall):
            if cid in sent and cid not in logged and at >= sent[cid] - 0.05:
                logged[cid] = max(0.0, at - sent[cid])
        return len(logged) == len(sent)

    await until(all_logged, timeout=120)
    return logged


async def _accepting(d: DaemonProcess, layout: _bigstore.Layout, url: str) -> dict[str, float]:
    """The daemon accepts ACCEPTS of the intake's requests, one every ACCEPT_EVERY_S,
    while two of the store's peers text accepted conversations (a consent change
    moves conversations between libxmtp's streams: cone/engine/_subscriptions.py)."""
    held = (await d.client.call("Requests", pb.RequestsRequest())).requests
    ids = [r.conversation_id for r in held[:ACCEPTS]]

    async def accept_all() -> None:
        for cid in ids:
            began = time.monotonic()
            await d.client.call("Accept", pb.AcceptRequest(conversation_id=cid))
            await asyncio.sleep(max(0.0, began + ACCEPT_EVERY_S - time.monotonic()))

    wall = time.time() - time.monotonic()
    seen = len(d.stderr())
    accepting = asyncio.create_task(accept_all())
    try:
        sent = await _known_during(layout, url, accepting, ACCEPTING_TEXT_EVERY_S)
        await accepting
    finally:
        accepting.cancel()  # done by now, unless the texts failed
    latencies = list((await _logged(d, sent, wall)).values())
    renewed: dict[str, list[float]] = {}
    for name, took in _RENEWED.findall(d.stderr()[seen:]):
        renewed.setdefault(name, []).append(float(took))
    print(f"  accepting: streams renewed, each in (s): {renewed}", flush=True)
    return {
        "accepts": len(ids),
        "accepting_messages_renewed_s": max(renewed.get("messages", [0.0])),
        "accepting_texts": len(latencies),
        "accepting_p50_ms": statistics.median(latencies) * 1000,
        "accepting_max_ms": max(latencies) * 1000,
        "accepting_slow": sum(1 for x in latencies if x > SLOW_S),
    }


def _report(n_conversations: int, results: dict[int, dict[str, float]]) -> None:
    sizes = sorted(results)
    print(f"\nbig store, {n_conversations:,} conversations:")
    rows = [
        ("cone's index in libxmtp's database, made once (s)", "index_s", "{:.1f}"),
        ("start to first receive (s)", "start_s", "{:.2f}"),
        ("receive (100) while starting, p50 (ms)", "during_start_receive_ms", "{:.1f}"),
        ("start to first sync done (s)", "synced_s", "{:.1f}"),
        ("  core: read / streams / first sync (s)", "", None),
        ("  of the read, libxmtp's conversation listing (s)", "listing_s", "{:.1f}"),
        ("full reconciliation, background (s)", "reconcile_s", "{:.1f}"),
        ("  messages compared / healed", None, None),
        ("the daemon's CPU from its start until that pass is done (s)", "start_cpu_s", "{:.1f}"),
        ("receive (100) during reconciliation, p50 (ms)", "during_reconcile_receive_ms", "{:.1f}"),
        ("receive (100) after it, p50 (ms)", "after_reconcile_receive_ms", "{:.1f}"),
        ("conversations page (50), the very first (ms)", "conversations_cold_ms", "{:.1f}"),
        ("conversations page (50), first, p50 of 10 more (ms)", "conversations_first_ms", "{:.1f}"),
        ("conversations page (50), walking 100 pages, p50 (ms)", "conversations_walk_ms", "{:.1f}"),
        ("conversations page (50), the 100th (ms)", "conversations_last_ms", "{:.1f}"),
        ("conversations page (50), walking again, p50 (ms)", "conversations_again_ms", "{:.1f}"),
        ("conversations page (50), the 100th again (ms)", "conversations_again_last_ms", "{:.1f}"),
        ("idle: CPU per 30 s (s)", "idle_cpu_s", "{:.2f}"),
        ("idle: catch-up syncs per 30 s", "idle_syncs", "{:.2f}"),
        ("idle: of them with groups synced, per 30 s", "idle_syncs_with_news", "{:.2f}"),
        ("idle: cone's conversation listings per 30 s", "idle_listings", "{:.2f}"),
        ("receive+ack drain of the backlog (msg/s)", "drain_msg_s", "{:,.0f}"),
        ("ingest, all sent by the peers (s)", "ingest_sent_s", "{:.2f}"),
        ("ingest, all in cone's inbox (s)", "ingest_s", "{:.2f}"),
        ("RSS after start (MiB)", "rss_start_mib", "{:.0f}"),
        ("RSS after reconciliation (MiB)", "rss_reconciled_mib", "{:.0f}"),
        ("RSS peak before the ingest burst (MiB)", "hwm_before_ingest_mib", "{:.0f}"),
        ("RSS after the ingest burst (MiB)", "rss_after_ingest_mib", "{:.0f}"),
        ("RSS peak (MiB)", "rss_peak_mib", "{:.0f}"),
        ("  of it anonymous, at the sampled peak (MiB)", "peak_anon_mib", "{:.0f}"),
        (
            "  of it mapping libxmtp's database, at the sampled peak (MiB)",
            "peak_db_map_mib",
            "{:.0f}",
        ),
        ("most descriptors on libxmtp's database at once (sampled)", "most_db_fds", "{:.0f}"),
        ("most mappings of libxmtp's database at once (sampled)", "most_db_maps", "{:.0f}"),
        ("most resident in them at once (sampled, MiB)", "most_db_map_mib", "{:.0f}"),
        ("restart: to first receive (s)", "restart_s", "{:.2f}"),
        ("restart: to first sync done (s)", "restart_synced_s", "{:.1f}"),
        ("restart: of it the core's read (s)", "restart_read_s", "{:.1f}"),
        (
            "restart: of that read, conversations read (something stored since)",
            "restart_start_read",
            "{:,.0f}",
        ),
        ("restart: full reconciliation from the marks (s)", "restart_reconcile_s", "{:.1f}"),
        ("restart: of it messages compared", "restart_compared", "{:,.0f}"),
        ("restart: of it conversations read whole", "restart_whole", "{:,.0f}"),
        (
            "restart: of it conversations with nothing stored since their mark",
            "restart_skipped",
            "{:,.0f}",
        ),
        ("restart: the daemon's CPU until that pass is done (s)", "restart_cpu_s", "{:.1f}"),
    ]
    if all("intake_s" in results[s] for s in sizes):
        rows += [
            ("intake: the peers made the new conversations (s)", "intake_made_s", "{:.1f}"),
            ("intake: all of them in cone's store (s)", "intake_s", "{:.1f}"),
            ("intake: first message to cone's store, p50 (ms)", "intake_p50_ms", "{:,.0f}"),
            ("intake: first message to cone's store, p95 (ms)", "intake_p95_ms", "{:,.0f}"),
            ("intake: the same by the daemon's log, p50 (ms)", "intake_log_p50_ms", "{:,.0f}"),
            ("intake: the same by the daemon's log, p95 (ms)", "intake_log_p95_ms", "{:,.0f}"),
            ("intake: the daemon's CPU over it (s)", "intake_cpu_s", "{:.1f}"),
            ("intake: texts into accepted conversations meanwhile", "known", "{:.0f}"),
            ("intake: each to cone's store by its log, p50 (ms)", "known_p50_ms", "{:,.0f}"),
            ("intake: each to cone's store by its log, max (ms)", "known_max_ms", "{:,.0f}"),
            ("accepting: requests accepted, one a second", "accepts", "{:.0f}"),
            ("accepting: texts into accepted conversations meanwhile", "accepting_texts", "{:.0f}"),
            ("accepting: each to cone's store by its log, p50 (ms)", "accepting_p50_ms", "{:,.0f}"),
            ("accepting: each to cone's store by its log, max (ms)", "accepting_max_ms", "{:,.0f}"),
            (f"accepting: of them over {SLOW_S} s", "accepting_slow", "{:.0f}"),
            (
                "accepting: `messages` renewed in, longest (s)",
                "accepting_messages_renewed_s",
                "{:.2f}",
            ),
        ]
    print(
        "| figure | "
        + " | ".join(f"{s:,} msgs" for s in sizes)
        + (" | growth |" if len(sizes) > 1 else " |")
    )
    for label, key, fmt in rows:
        if key and any(key not in results[s] for s in sizes):
            continue  # a phase not run (--start-only)
        if key == "":
            cells = [
                "{read_s:.1f} / {streams_s:.1f} / {sync_s:.1f}".format(**results[s]) for s in sizes
            ]
            print(f"| {label} | " + " | ".join(cells) + (" | |" if len(sizes) > 1 else " |"))
            continue
        if key is None:
            cells = [f"{results[s]['compared']:,.0f} / {results[s]['healed']:.0f}" for s in sizes]
            print(f"| {label} | " + " | ".join(cells) + (" | |" if len(sizes) > 1 else " |"))
            continue
        assert fmt is not None
        cells = [fmt.format(results[s][key]) for s in sizes]
        growth = ""
        if len(sizes) > 1 and results[sizes[0]][key]:
            growth = f" | {results[sizes[-1]][key] / results[sizes[0]][key]:.2f}x"
        print(f"| {label} | " + " | ".join(cells) + growth + " |")
    for s in sizes:
        r = results[s]
        if "ingest_s" not in r:
            continue
        print(f"{s:,}: ingest of {r['active']:.0f} messages into as many conversations took "
              f"{r['ingest_s'] / r['ingest_sent_s']:.2f}x the peers' publishing; drained {r['drained']:.0f}")  # fmt: skip
        if "intake_s" in r:
            print(f"{s:,}: intake of {r['intake']:.0f} new conversations took "
                  f"{r['intake_s'] / r['intake_made_s']:.2f}x the peers' making of them")  # fmt: skip


async def _main(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.messages.split(",")]
    layouts = {n: await _bigstore.generate(args.cache, args.conversations, n) for n in sizes}
    results = {}
    with tempfile.TemporaryDirectory(prefix="cone-bs-") as work:
        for n, layout in layouts.items():
            print(f"measuring {n:,} messages ...", flush=True)
            results[n] = await run_size(
                layout, n, args.active, Path(work), args.idle_s, args.intake, args.start_only
            )
            print(f"  {n:,}: {results[n]}", flush=True)
    _report(args.conversations, results)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench bigstore", description=__doc__)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--messages", default="100000,1000000", help="sizes, comma-separated")
    parser.add_argument("--active", type=int, default=1000)
    parser.add_argument("--idle-s", type=float, default=90.0, help="the idle phase's length")
    parser.add_argument("--cache", type=Path, default=_bigstore.default_cache())
    parser.add_argument(
        "--intake", type=int, default=500, help="new conversations in the intake phase (0: none)"
    )
    parser.add_argument(
        "--start-only",
        action="store_true",
        help="only the start, its first sync and the full reconciliation",
    )
    asyncio.run(_main(parser.parse_args(argv)))
