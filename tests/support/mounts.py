"""A real small filesystem for a test: a tmpfs mounted for it, and filled to the brim.

Mounting needs root (or CAP_SYS_ADMIN): where it is refused, the test is skipped
with the reason.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(size: str = "1m") -> Iterator[Path]:
    """A tmpfs of `size` mounted on a new directory, unmounted and removed afterwards."""
    mount_point = Path(tempfile.mkdtemp(prefix="cone-fs-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount_point)],
        capture_output=True,
    )
    if done.returncode != 0:
        mount_point.rmdir()
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)
        mount_point.rmdir()


def fill(mount_point: Path, leave: int = 0) -> Path:
    """Write a file until the disk refuses another byte, then free about `leave` bytes
    (rounded up to the filesystem's pages); returns the filler."""
    filler = mount_point / "filler"
    with filler.open("wb", buffering=0) as f:
        block = b"\0" * 65536
        while block:
            try:
                f.write(block)
            except OSError:
                block = block[: len(block) // 2]
        if leave:
            f.truncate(max(0, f.tell() - leave))
    return filler


__all__ = ["fill", "tmpfs"]
