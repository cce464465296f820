"""Fixtures of the engine's tests."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cone.engine import _client
from cone.engine._offload import Offload
from cone.engine.engine import Engine
from cone.store import xmtp_database
from support.peers import Peer, plain_group_options


@pytest.fixture
def offload() -> Iterator[Offload]:
    """An offload, closed after the test (its threads end)."""
    made = Offload()
    yield made
    made.close()


@pytest.fixture
def api() -> str:
    """The XMTP API libxmtp speaks to the devnet (a module may parametrize it)."""
    return "v3"


@pytest.fixture
async def engine(devnet: str, api: str, tmp_path: Path) -> AsyncIterator[Engine]:
    """An engine with a new identity on the devnet, closed after the test."""
    made = await Engine.open(
        api_url=devnet,
        db_path=str(tmp_path / "cone.db3"),
        db_key=os.urandom(32),
        wallet_key=_client.generate_wallet_key(),
        new=True,
        child=xmtp_database,
        gateway_url=devnet if api == "d14n" else None,
    )
    yield made
    await made.close()


@pytest.fixture
async def dm_and_group(engine: Engine, alice: Peer) -> tuple[str, Any]:
    """A DM with `alice` holding a text of hers, and a group she made with the engine
    (libxmtp's object, hers), both synced into the engine: the DM's id and the group."""
    dm = await engine.find_or_create_dm(alice.inbox_id)
    await alice.sync()
    await alice.send(alice.conversation(bytes.fromhex(dm.id)), "in the DM")
    group = await alice.client.conversations().create_group(
        [engine.inbox_id], plain_group_options()
    )
    await engine.sync_all()
    return dm.id, group
