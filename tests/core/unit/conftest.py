"""Unit tests of the core's logic: a real SQLCipher store in tmp_path, the engine faked
in memory (tests/support/fake_engine.py). No devnet, no daemon: each runs in milliseconds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cone.core.service import Core
from cone.store import Store
from support.fake_engine import FakeEngine

KEY = bytes(range(32))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    """A real, empty store."""
    s = Store.open(tmp_path / "cone.db", KEY)
    yield s
    s.close()


@pytest.fixture
def engine() -> FakeEngine:
    """An in-memory engine for this identity."""
    return FakeEngine()


@pytest.fixture
async def core(store: Store, engine: FakeEngine, tmp_path: Path) -> Core:
    """The core over the real store and the fake engine, not started (no background work)."""
    return Core(store, engine, "local", tmp_path / "xmtp.db")
