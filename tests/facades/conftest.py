"""Fixtures for facade tests: short state directories and raw libxmtp peers."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.daemons import short_home
from support.peers import Peer


@pytest.fixture
def home() -> Iterator[Path]:
    """A fresh state directory with a short path (Unix socket paths are ≤107 bytes)."""
    path = short_home()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def alice(devnet: str, tmp_path: Path) -> Peer:
    """A raw libxmtp peer on the devnet."""
    return await Peer.create(devnet, tmp_path, "alice")
