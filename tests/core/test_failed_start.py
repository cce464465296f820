"""A start that fails half-way leaves nothing looser than docs/security.md says."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from support.daemons import run_cone
from support.ports import fresh_port


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{fresh_port()}"


async def test_a_first_start_without_a_network_leaves_only_owner_only_files(home: Path) -> None:
    state = home / "state"  # cone creates it: its own mode is checked too
    old = os.umask(0o022)  # a usual login umask, inherited by the command
    try:
        code, err = await run_cone(
            ["daemon", "--home", str(state), "--api-url", _closed_port_url()]
        )
    finally:
        os.umask(old)
    assert code == 5, err  # network_unavailable: libxmtp could not register
    assert (state / "xmtp.db3").exists()  # it got as far as libxmtp's own files
    for path in [state, *state.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        documented = 0o700 if path.is_dir() else 0o600  # stricter is fine (salt: 0400)
        assert mode & ~documented == 0, f"{path.name} is {mode:o}"
