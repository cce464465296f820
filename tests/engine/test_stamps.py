"""Each conversation's newest insert stamp, read in one query of libxmtp's database
from a child process while libxmtp has it open (cone/engine/_stamps.py): what a read
of the conversation's messages would find, and nothing when it cannot be read."""

from __future__ import annotations

import time
from typing import Any

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.engine.engine import Engine
from support.peers import Peer


async def test_the_newest_stamps_are_what_each_conversation_s_read_finds(
    engine: Engine, alice: Peer, dm_and_group: tuple[str, Any]
) -> None:
    dm_id, group = dm_and_group
    gid = bytes(group.id()).hex()
    before = time.time_ns()

    newest = await engine.newest_stamps()
    assert newest is not None
    assert newest.taken_ns >= before
    for cid in (dm_id, gid):
        stamps = [m.inserted_at_ns for m in await engine.messages_since(cid, 0)]
        assert stamps, cid
        assert newest.newest[cid] == max(stamps)
        assert newest.nothing_after(cid, max(stamps))
        assert not newest.nothing_after(cid, max(stamps) - 1)
    assert not newest.nothing_after("00" * 16, 0)  # not seen: read it

    await alice.send(group, "later")
    await engine.sync_all()
    again = await engine.newest_stamps()
    assert again is not None
    assert again.newest[gid] > newest.newest[gid]
    assert again.newest[dm_id] == newest.newest[dm_id]


async def test_stamps_that_cannot_be_read_are_none(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamps = engine._stamps
    assert stamps is not None
    monkeypatch.setattr(stamps, "_key", b"\x01" * 32)  # not the database's key
    assert await engine.newest_stamps() is None


async def test_a_dm_two_inboxes_made_at_once_has_the_stamps_of_both_its_groups(
    engine: Engine, alice: Peer
) -> None:
    """Each side made its own DM group before seeing the other's: libxmtp stitches them
    into one conversation and reads the messages of both for either id."""
    mine = await engine.find_or_create_dm(alice.inbox_id)
    hers = await alice.client.conversations().find_or_create_dm(
        engine.inbox_id, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
    )
    assert bytes(hers.id()).hex() != mine.id
    await alice.send(hers, "in her group")
    await engine.sync_all()

    read = await engine.messages_since(mine.id, 0)
    newest = await engine.newest_stamps()
    assert newest is not None
    assert newest.newest[mine.id] == max(m.inserted_at_ns for m in read)
    assert newest.newest[bytes(hers.id()).hex()] == newest.newest[mine.id]
