"""Backup and restore of a store holding N messages, against a plain file copy.

    python -m bench backup [--messages 100000]

The daemon runs (on an in-process devnet) while `cone backup` streams the encrypted
backup; `cone restore` then rebuilds a new state directory. The baseline is copying
the state directory's files (the limit: no snapshot, no encryption, no checks).
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
from support.daemons import DaemonProcess, run_cone, short_home


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


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench backup", description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    asyncio.run(_main(parser.parse_args(argv).messages))
