"""Every full or failing target says so: a file cone writes on a full disk, or in a
place it cannot write, and a port already taken, each fail in one line with their
exit code (docs/cli.md) and leave nothing half-made.

The full disk is real: a small tmpfs the test mounts and fills (skipped where mounting
is refused). The busy port is a socket the test binds.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cone.errors import StateError
from cone.facades.http._token import TOKEN_FILE, load_or_create
from support.cli import cone_cli
from support.daemons import DaemonProcess, short_home
from support.mounts import fill, tmpfs
from support.waiting import until

ENV = {"CONE_BACKUP_PASSPHRASE": "correct horse battery staple 42"}


@pytest.fixture
def disk() -> Iterator[Path]:
    """A 1 MiB tmpfs."""
    with tmpfs("1m") as mount_point:
        yield mount_point


def _one_line(err: str) -> str:
    """The one line a failure prints (after the progress lines of a restore, which
    print a line every 10 % when stderr is not a terminal)."""
    lines = [line for line in err.strip().splitlines() if not PROGRESS.match(line)]
    assert len(lines) == 1, err
    return lines[0]


PROGRESS = re.compile(r"^(backup|restore) \S+: \d+% \(")


def _left(disk: Path) -> list[str]:
    return sorted(str(p.relative_to(disk)) for p in disk.rglob("*"))


async def test_a_backup_to_a_full_disk_fails_in_one_line_and_leaves_no_partial_file(
    devnet: str, disk: Path
) -> None:
    home = short_home()
    async with DaemonProcess(home, devnet):
        filler = fill(disk)
        full = await cone_cli(["backup", str(disk / "a.cone"), "--home", str(home)], env=ENV)
        assert full.code == 8
        assert _one_line(full.err).startswith("cone backup: the disk being written is full")
        assert _left(disk) == ["filler"]

        # Room for a part of it: the part written is removed.
        filler.unlink()
        fill(disk, leave=128 * 1024)
        part = await cone_cli(["backup", str(disk / "a.cone"), "--home", str(home)], env=ENV)
        assert part.code == 8
        assert "is full (No space left on device)" in _one_line(part.err)
        assert _left(disk) == ["filler"]

        nowhere = await cone_cli(
            ["backup", str(disk / "no" / "a.cone"), "--home", str(home)], env=ENV
        )
        assert nowhere.code == 8
        assert "cannot be written (No such file or directory)" in _one_line(nowhere.err)


async def _backup_file(devnet: str, file: Path) -> None:
    home = short_home()
    async with DaemonProcess(home, devnet):
        made = await cone_cli(["backup", str(file), "--home", str(home)], env=ENV)
        assert made.code == 0, made.err


async def test_a_restore_onto_a_full_disk_fails_in_one_line_and_leaves_nothing(
    devnet: str, disk: Path, tmp_path: Path
) -> None:
    file = tmp_path / "a.cone"
    await _backup_file(devnet, file)
    fill(disk)
    args = ["restore", str(file), "--home", str(disk / "restored"), "--api-url", devnet]
    full = await cone_cli(args, env=ENV)
    assert full.code == 8
    assert _one_line(full.err).startswith("cone restore: the disk being written is full")
    assert _left(disk) == ["filler"]


async def test_a_restore_that_fills_the_disk_part_way_says_the_disk_is_full(
    devnet: str, disk: Path, tmp_path: Path
) -> None:
    file = tmp_path / "a.cone"
    await _backup_file(devnet, file)
    args = ["restore", str(file), "--home", str(disk / "restored"), "--api-url", devnet]
    # Each room runs out at another step: a file's write, SQLite's pages, the key.
    for room in range(64 * 1024, file.stat().st_size, 64 * 1024):
        (disk / "filler").unlink(missing_ok=True)
        fill(disk, leave=room)
        part = await cone_cli(args, env=ENV)
        assert _left(disk) == ["filler"], room
        assert part.code == 8, (room, part.err)
        assert "is full" in _one_line(part.err), room


async def test_a_log_file_that_cannot_be_written_stops_the_command_before_it_makes_anything(
    devnet: str, disk: Path
) -> None:
    fill(disk)
    home = short_home()
    home.rmdir()
    log = disk / "cone.log"
    full = await cone_cli(
        ["daemon", "--home", str(home), "--api-url", devnet, "--log-file", str(log)]
    )
    assert full.code == 8
    assert _one_line(full.err) == (
        f"cone daemon: the disk holding the log file {log} is full: free space there or give "
        "another --log-file"
    )
    assert not home.exists() and _left(disk) == ["filler"]

    nowhere = disk / "no" / "cone.log"
    missing = await cone_cli(["status", "--home", str(home), "--log-file", str(nowhere)])
    assert missing.code == 8
    assert "cannot be written (No such file or directory)" in _one_line(missing.err)


class _LoggingDaemon(DaemonProcess):
    """A daemon logging everything (`-vv`: libxmtp's debug too) into `log_file`."""

    log_file: Path

    def args(self) -> list[str]:
        return [*super().args(), "-vv", "--log-file", str(self.log_file)]


async def test_a_log_file_that_fills_up_costs_log_lines_said_once_never_the_daemon(
    devnet: str, disk: Path
) -> None:
    home = short_home()
    daemon = _LoggingDaemon(home, devnet)
    daemon.log_file = disk / "cone.log"
    async with daemon:
        filler = fill(disk)

        async def said(text: str) -> bool:
            await daemon.client.call("Sync", _sync())  # more log lines; answered all along
            return text in daemon.stderr()

        await until(lambda: said("log lines are lost until it can be written"))
        assert (await daemon.client.identity()).inbox_id
        filler.unlink()
        await until(lambda: said(f"the log file {daemon.log_file} is written again"))
        err = daemon.stderr()
    assert err.count("log lines are lost") == 1, err
    assert "Logging error" not in err and "Traceback" not in err


def _sync() -> object:
    from conepb.v1 import cone_pb2 as pb

    return pb.SyncRequest()


async def test_a_busy_http_port_fails_in_one_line_before_an_identity_is_made(devnet: str) -> None:
    home = short_home()
    home.rmdir()
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        args = ["daemon", "--home", str(home), "--api-url", devnet, "--http", f"127.0.0.1:{port}"]
        taken = await cone_cli(args)
    assert taken.code == 8
    assert _one_line(taken.err) == (
        f"cone daemon: --http 127.0.0.1:{port} is already in use: stop what listens there "
        "or choose another port"
    )
    assert not home.exists()  # nothing of an identity, not even its directory


async def test_a_first_start_on_a_full_disk_says_so_and_leaves_no_identity(
    devnet: str, disk: Path
) -> None:
    fill(disk, leave=64 * 1024)  # room for the directory and the key, not the store
    home = disk / "h"
    made = await cone_cli(["init", "--home", str(home), "--api-url", devnet])
    assert made.code == 6
    assert "the disk holding the state directory is full" in _one_line(made.err)
    status = await cone_cli(["status", "--home", str(home), "--api-url", devnet])
    assert status.code == 7  # no identity: a later start, with space, makes it


def test_a_token_that_cannot_be_written_leaves_no_file(disk: Path) -> None:
    home = disk / "h"
    home.mkdir()
    fill(disk)
    with pytest.raises(StateError) as err:
        load_or_create(home)
    assert err.value.reason == "storage_full"
    assert not (home / TOKEN_FILE).exists()
