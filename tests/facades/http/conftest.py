"""Fixtures of the HTTP front's tests: a daemon serving HTTP on a devnet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from support.http_daemon import HttpDaemon


@pytest.fixture
async def daemon(home: Path, devnet: str) -> AsyncIterator[HttpDaemon]:
    """A daemon with its HTTP front on a free loopback port."""
    async with HttpDaemon(home, devnet) as d:
        yield d
