"""Fixtures shared by every test package."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cone.devnet import Devnet
from support.daemons import short_home
from support.peers import Peer


@pytest.fixture
async def devnet_node() -> AsyncIterator[Devnet]:
    """An in-process devnet in memory on a free port, started; `.faults` injects faults."""
    node = Devnet(port=0)
    async with node:
        yield node


@pytest.fixture
def devnet(devnet_node: Devnet) -> str:
    """The URL of an in-process devnet (`http://127.0.0.1:PORT`)."""
    return devnet_node.url


@pytest.fixture
async def alice(devnet: str, tmp_path: Path) -> Peer:
    """A raw libxmtp peer on the devnet."""
    return await Peer.create(devnet, tmp_path, "alice")


@pytest.fixture
def home() -> Iterator[Path]:
    """A fresh state directory with a short path (Unix socket paths are ≤107 bytes)."""
    path = short_home()
    yield path
    shutil.rmtree(path, ignore_errors=True)
