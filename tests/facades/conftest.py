"""Fixtures for facade tests: short state directories and raw libxmtp peers."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.peers import Peer


@pytest.fixture
async def alice(devnet: str, tmp_path: Path) -> Peer:
    """A raw libxmtp peer on the devnet."""
    return await Peer.create(devnet, tmp_path, "alice")
