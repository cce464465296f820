"""A store of its own for each test, in its temporary directory (a module that needs a
conversation in it first defines its own `store`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cone.store import Store

KEY = bytes(range(32))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "cone.db", KEY)
    try:
        yield s
    finally:
        s.close()
