"""Fixtures for daemon tests: a real `cone daemon` subprocess on the devnet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from support.daemons import DaemonProcess


@pytest.fixture
async def daemon(home: Path, devnet: str) -> AsyncIterator[DaemonProcess]:
    """A started daemon with its own identity on the devnet."""
    async with DaemonProcess(home, devnet) as d:
        yield d
