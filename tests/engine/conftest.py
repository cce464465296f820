"""Fixtures of the engine's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cone.engine._offload import Offload


@pytest.fixture
def offload() -> Iterator[Offload]:
    """An offload, closed after the test (its threads end)."""
    made = Offload()
    yield made
    made.close()
