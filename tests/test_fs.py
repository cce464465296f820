"""Fixing a file's permissions never drops a lock: closing any descriptor of a file
drops every POSIX lock the process holds on it, SQLite's on an open database among
them (cone/_fs.py, `make_private`)."""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
from pathlib import Path

from cone._fs import make_private


def _held_by_another_process(path: Path) -> bool:
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try:\n"
        "    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except OSError:\n"
        "    print('held')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip() == "held"


def test_a_file_made_private_keeps_the_locks_this_process_holds(tmp_path: Path) -> None:
    path = tmp_path / "database"
    path.write_bytes(b"pages")
    path.chmod(0o644)
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH)  # as SQLite holds an open database
        assert _held_by_another_process(path)
        make_private(path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert _held_by_another_process(path)
        make_private(path)  # already private: left as it is
        assert _held_by_another_process(path)
    finally:
        os.close(fd)
    assert not _held_by_another_process(path)


def test_a_link_and_a_missing_file_are_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("x")
    target.chmod(0o644)
    link = tmp_path / "link"
    link.symlink_to(target)
    make_private(link)
    make_private(tmp_path / "gone")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
