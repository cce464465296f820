"""Fixtures for core tests: a real `cone daemon` subprocess on the devnet.

The daemon and `alice` run on V3 unless a test parametrizes `backend` over
`support.daemons.BACKENDS`: then the same test runs again with both on D14N,
through the devnet's gateway (the devnet's own URL).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from support.daemons import DaemonProcess
from support.peers import Peer


@pytest.fixture
def backend() -> str:
    """The backend of the daemon and `alice`: V3 unless the test parametrizes it."""
    return "v3"


@pytest.fixture
async def daemon(home: Path, devnet: str, backend: str) -> AsyncIterator[DaemonProcess]:
    """A started daemon with its own identity on the devnet."""
    gateway = devnet if backend == "d14n" else None
    async with DaemonProcess(home, devnet, gateway_url=gateway) as d:
        yield d


@pytest.fixture
async def alice(devnet: str, tmp_path: Path, backend: str) -> Peer:
    """A raw libxmtp peer on the devnet, on the daemon's backend."""
    return await Peer.create(devnet, tmp_path, "alice", d14n=backend == "d14n")
