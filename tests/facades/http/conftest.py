"""Fixtures of the HTTP front's tests: a daemon serving HTTP on a devnet, and a browser."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.browser import chromium
from support.http_daemon import HttpDaemon


@pytest.fixture
async def daemon(home: Path, devnet: str) -> AsyncIterator[HttpDaemon]:
    """A daemon with its HTTP front on a free loopback port."""
    async with HttpDaemon(home, devnet) as d:
        yield d


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium (the system's), its downloads in the test's directory."""
    with chromium(tmp_path) as driver:
        yield driver
