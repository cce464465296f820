"""Backup and restore: of a store holding N messages, and to a restored copy's first
safe send in each of N conversations.

    python -m bench backup [--messages 100000] [--conversations 10,1000]

Messages: the daemon runs (on an in-process devnet) while `cone backup` streams the
encrypted backup; `cone restore` then rebuilds a new state directory. The baseline is
copying the state directory's files (no snapshot, no encryption, no checks).

Conversations: a daemon makes N groups with one peer and sends once in each, is
backed up, sends once more in each (the original going on after the backup), and
stops. The figure is from `cone restore` to the restored copy's first send answered
in every conversation (each send first syncs its conversation, checks it and
publishes the key update due: docs/backup.md), against the same N sends made by the
original before the backup (the baseline: a send with nothing to check).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench import _prefill
from cone.devnet import Devnet
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, run_cone, short_home
from support.peers import Peer


async def _main(n: int) -> None:
    env = {**os.environ, "CONE_BACKUP_PASSPHRASE": "bench passphrase"}
    async with Devnet(port=0) as url:
        home = short_home()
        async with DaemonProcess(home, url) as d:
            await d.stop()
            _prefill.fill_home(home, n)
            await d.start()
            with tempfile.TemporaryDirectory() as work:
                file = Path(work) / "bench.cone"
                t = time.perf_counter()
                code, err = await run_cone(["backup", str(file), "--home", str(home)], env)
                backup_s = time.perf_counter() - t
                assert code == 0, err.decode()
                await d.stop()
                t = time.perf_counter()
                copy_dir = Path(work) / "copy"
                copy_dir.mkdir()
                for f in home.iterdir():
                    if f.is_file():
                        shutil.copy(f, copy_dir / f.name)
                copy_s = time.perf_counter() - t
                target = Path(work) / "restored"
                t = time.perf_counter()
                code, err = await run_cone(["restore", str(file), "--home", str(target)], env)
                restore_s = time.perf_counter() - t
                assert code == 0, err.decode()
                size = file.stat().st_size
        shutil.rmtree(home, ignore_errors=True)
    print(f"{n} messages, backup file {size / 1e6:.1f} MB: backup {backup_s:.2f} s "
          f"({backup_s / copy_s:.1f}x a plain copy), restore {restore_s:.2f} s "
          f"({restore_s / copy_s:.1f}x), plain file copy {copy_s:.3f} s")  # fmt: skip


async def _send_in_each(d: DaemonProcess, groups: list[str], text: str) -> float:
    """One send in every group, one after the other; the seconds they took."""
    t = time.perf_counter()
    for cid in groups:
        answer = await d.client.call("Send", pb.SendRequest(to=cid, text=text, key=f"{text}-{cid}"))
        assert answer.published, answer
    return time.perf_counter() - t


async def _restored_sends(n: int) -> None:
    env = {**os.environ, "CONE_BACKUP_PASSPHRASE": "bench passphrase"}
    async with Devnet(port=0) as url:
        with tempfile.TemporaryDirectory() as work:
            peer = await Peer.create(url, Path(work), "peer")
            home, restored = short_home(), short_home()
            shutil.rmtree(restored)
            file = Path(work) / "bench.cone"
            async with DaemonProcess(home, url) as d:
                groups = []
                for i in range(n):
                    made = await d.client.call(
                        "CreateGroup", pb.CreateGroupRequest(members=[peer.address], key=f"g{i}")
                    )
                    groups.append(made.group.conversation_id)
                baseline_s = await _send_in_each(d, groups, "before")
                code, err = await run_cone(["backup", str(file), "--home", str(home)], env)
                assert code == 0, err.decode()
                await _send_in_each(d, groups, "after")
            t = time.perf_counter()
            code, err = await run_cone(["restore", str(file), "--home", str(restored)], env)
            assert code == 0, err.decode()
            restore_s = time.perf_counter() - t
            async with DaemonProcess(restored, url) as d2:
                started_s = time.perf_counter() - t
                first_s = await _send_in_each(d2, groups, "restored")
                total_s = time.perf_counter() - t
                second_s = await _send_in_each(d2, groups, "again")
            peer.close()
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(restored, ignore_errors=True)
    print(f"{n} conversations: restore to every first safe send {total_s:.1f} s "
          f"(restore {restore_s:.1f} s, daemon answering at {started_s:.1f} s, first sends "
          f"{first_s:.1f} s = {first_s / n * 1000:.0f} ms each); the original's sends before "
          f"the backup {baseline_s / n * 1000:.0f} ms each, so a first send after a restore "
          f"costs {first_s / baseline_s:.1f}x; the copy's second sends "
          f"{second_s / n * 1000:.0f} ms each ({second_s / baseline_s:.1f}x)")  # fmt: skip


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench backup", description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--conversations", default="10,1000", help="comma-separated counts")
    args = parser.parse_args(argv)
    if args.messages:
        asyncio.run(_main(args.messages))
    for n in (int(c) for c in args.conversations.split(",") if c):
        asyncio.run(_restored_sends(n))
