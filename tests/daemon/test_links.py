"""Nothing follows a symbolic link out of the state directory (or beside a backup)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from support.daemons import DaemonProcess, run_cone

#: A node nobody listens on: these daemons are refused before they reach it.
NOWHERE = "http://127.0.0.1:9"


def _victim(tmp_path: Path, name: str = "victim") -> Path:
    victim = tmp_path / name
    victim.write_text("precious\n")
    victim.chmod(0o644)
    return victim


async def test_a_linked_cone_lock_is_refused_and_its_target_untouched(
    home: Path, tmp_path: Path
) -> None:
    victim = _victim(tmp_path)
    (home / "cone.lock").symlink_to(victim)
    code, err = await run_cone(["daemon", "--home", str(home), "--api-url", NOWHERE])
    assert code == 6, err.decode()
    assert b"cone.lock is a symbolic link" in err
    assert victim.read_text() == "precious\n"


async def test_a_linked_store_file_is_refused_and_its_target_untouched(
    home: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "elsewhere.db"  # dangling: it would be created there
    (home / "cone.db").symlink_to(victim)
    code, err = await run_cone(["daemon", "--home", str(home), "--api-url", NOWHERE])
    assert code == 6, err.decode()
    assert b"cone.db is a symbolic link" in err
    assert not victim.exists()


async def test_fixing_permissions_never_follows_a_link(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    await daemon.stop()
    victim = _victim(tmp_path)
    (daemon.home / "notes").symlink_to(victim)
    loose = daemon.home / "loose"
    loose.write_text("x")
    loose.chmod(0o644)
    await daemon.start()
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600


async def test_backup_never_writes_through_a_planted_link(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    target = tmp_path / "agent.cone"
    partial_victim = _victim(tmp_path, "partial-victim")
    target_victim = _victim(tmp_path, "target-victim")
    os.symlink(partial_victim, f"{target}.partial")
    target.symlink_to(target_victim)
    env = {**os.environ, "CONE_BACKUP_PASSPHRASE": "a passphrase"}
    args = ["backup", str(target), "--home", str(daemon.home)]
    code, err = await run_cone(args, env)
    assert code == 4, err.decode()  # FILE exists (a link): kept unless --force
    assert partial_victim.read_text() == target_victim.read_text() == "precious\n"
    code, err = await run_cone([*args, "--force"], env)
    assert code == 0, err.decode()
    assert partial_victim.read_text() == target_victim.read_text() == "precious\n"
    assert not target.is_symlink() and target.stat().st_size > 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    # No temporary file is left beside it.
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["agent.cone", "agent.cone.partial", "partial-victim", "target-victim"]
    )
