"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cone.devnet import Devnet


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
