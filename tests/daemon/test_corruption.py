"""Damaged state files are named as damage (state_error, exit 6), with what to do."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cone.errors import StateError
from support.daemons import STOP_WAIT_S, DaemonProcess, run_cone


def _overwrite(path: Path, offset: int, length: int = 32) -> None:
    assert not os.path.exists(f"{path}-wal")  # the file alone is the state
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(os.urandom(length))


def _last_page(path: Path) -> int:
    return path.stat().st_size - 3000


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("cone.db", lambda p: 100),  # page 1: read first, as the key is checked
        ("cone.db", _last_page),  # further in: read only by the integrity check
        ("xmtp.db3", lambda p: 100),
    ],
    ids=["cone.db page 1", "cone.db last page", "xmtp.db3 page 1"],
)
async def test_a_damaged_database_is_reported_as_damage_not_a_key_or_network_error(
    daemon: DaemonProcess, name: str, where: Callable[[Path], int]
) -> None:
    await daemon.stop()
    path = daemon.home / name
    _overwrite(path, where(path))
    code, err = await run_cone(daemon.args())
    assert code == 6, err.decode()
    assert b"is damaged" in err
    assert b"cone restore" in err
    assert b"database key does not open" not in err


async def test_a_missing_salt_is_a_state_error(daemon: DaemonProcess) -> None:
    await daemon.stop()
    os.unlink(daemon.home / "xmtp.db3.sqlcipher_salt")
    code, err = await run_cone(daemon.args())
    assert code == 6, err.decode()
    assert b"sqlcipher_salt is missing" in err


async def test_a_wrong_key_is_still_a_wrong_key(daemon: DaemonProcess) -> None:
    await daemon.stop()
    code, err = await run_cone(daemon.args(), {**os.environ, "CONE_DB_KEY": "11" * 32})
    assert code == 6
    assert b"database key does not open" in err


async def test_the_daemon_answers_before_its_page_check_and_stops_for_what_it_finds(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    """The store's page-by-page check runs beside the calls, not before them: held
    before it starts, a daemon whose `cone.db` is damaged past page 1 and the schema
    answers (a call that meets the damaged page is told so: which pages the start and
    a call read depends on what the store holds); let go, the check finds the damage
    and the daemon stops by itself, as a start refused for it would: exit 6, saying
    what to do."""
    await daemon.stop()
    path = daemon.home / "cone.db"
    _overwrite(path, _last_page(path))
    held, release = tmp_path / "held", tmp_path / "release"
    daemon.env.update(
        CONE_FAILPOINT="page_check",
        CONE_FAILPOINT_FILE=str(held),
        CONE_FAILPOINT_RELEASE=str(release),
    )
    await daemon.restart()  # answers Identity
    assert held.exists()
    try:
        assert (await daemon.status()).identity.inbox_id  # a call that reads the store
    except StateError as err:  # it met the damaged page
        assert err.reason == "corrupt_database" and "cone restore" in err.message
    release.touch()
    assert await daemon.wait_exit(STOP_WAIT_S) == 6
    assert not daemon.needed_kill
    err = daemon.stderr()
    assert "is damaged" in err and "cone restore" in err
    assert "cone's store is damaged; stopping" in err
