"""libxmtp's message count against its own listing, as the catch-up's count check
compares them (cone/core/intake/reconciliation.py): every message the listing returns is
counted, a DM's group updates included."""

from __future__ import annotations

from typing import Any

from cone.engine.engine import Engine
from support.peers import Peer


async def test_a_conversation_s_count_is_what_its_listing_returns(
    engine: Engine, alice: Peer, dm_and_group: tuple[str, Any]
) -> None:
    dm_id, group = dm_and_group
    await alice.send(group, "in the group")
    await engine.sync_all()
    gid = bytes(group.id()).hex()

    listed = await engine.messages_since(dm_id, 0)
    # libxmtp 1.10 leaves a DM's group updates out of its own count.
    assert any(not m.application for m in listed)
    assert await engine.message_count(dm_id) == len(listed)
    listed = await engine.messages_since(gid, 0)
    assert any(not m.application for m in listed)
    assert await engine.message_count(gid) == len(listed)
