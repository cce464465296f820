"""cone's text of libxmtp's conversation listing view (cone/engine/_listing_view.py):
the same rows as libxmtp 1.10's, found by index; put back before another libxmtp build
opens the database; a text cone does not know left alone. Real engines and libxmtp
databases; the database is read and written from child processes, as cone does."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cone.engine import _client, _cursor_index, _listing_view, _opening

from .test_cursor_index import _open, _sql

_VIEW_SQL = "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'conversation_list'"


def _ours() -> str:
    return _listing_view.ours(_cursor_index.index_name().removeprefix(_cursor_index.PREFIX))


def _view(home: Path, key: bytes) -> str:
    ((text,),) = _sql(home, key, [_VIEW_SQL])
    return str(text)


def _body(text: str) -> str:
    """The view's query, from its CREATE VIEW text."""
    return text.split(" AS\n", 1)[1]


def _rows(source: str) -> str:
    """Every column of the listing from `source`, blobs as hex, in the listing's order."""
    return (
        "SELECT hex(id), created_at_ns, hex(message_id), hex(decrypted_message_bytes),"
        " sent_at_ns, message_kind, hex(sender_installation_id), sender_inbox_id,"
        " delivery_status, content_type, version_major, version_minor, authority_id,"
        " sequence_id, originator_id, membership_state, installations_last_checked,"
        " added_by_inbox_id, welcome_sequence_id, hex(dm_id), rotated_at_ns,"
        f" conversation_type, is_commit_log_forked FROM {source}"
    )


def _message(group: str, n: int, sent: int, kind: int = 1, content_type: int = 1) -> str:
    """A stored message, as bench/_bigstore.py writes them, in a group by hex id."""
    return (
        "INSERT INTO group_messages (id, group_id, decrypted_message_bytes, sent_at_ns, kind,"
        " sender_installation_id, sender_inbox_id, delivery_status, content_type,"
        " version_major, version_minor, authority_id, reference_id, originator_id,"
        " sequence_id, inserted_at_ns, expire_at_ns, should_push)"
        f" VALUES (randomblob(32), x'{group}', x'{n:02x}', {sent}, {kind}, x'02', 'inbox', 2,"
        f" {content_type}, 1, 0, 'xmtp.org', NULL, 10, {n}, {n}, NULL, 1)"
    )


async def test_the_view_cone_makes_lists_what_libxmtps_lists(devnet: str, tmp_path: Path) -> None:
    # What libxmtp makes, without cone: the text cone knows as 1.10's.
    raw_home, raw_key = tmp_path / "raw", os.urandom(32)
    raw_home.mkdir()
    client = await _client.open_client(
        api_url=devnet, db_path=str(raw_home / "xmtp.db3"), db_key=raw_key,
        wallet_key=_client.generate_wallet_key(), gateway_url=None, register=True,
        allow_offline=False,
    )  # fmt: skip
    client.release_db_connection()
    del client
    assert _view(raw_home, raw_key) == _listing_view.ORIGINAL

    key = os.urandom(32)
    engine = await _open(tmp_path, _client.generate_wallet_key(), key, devnet, new=True)
    try:
        assert _view(tmp_path, key) == _ours()
        groups = [
            await engine.groups.create_local(
                name=f"g{i}", description=None, image_url=None, app_data=""
            )
            for i in range(5)
        ]
        a, b, c, d, _empty = groups
        _sql(tmp_path, key, [
            _message(a, 1, 100), _message(a, 2, 300), _message(a, 3, 200),
            # newer, but not what the listing shows: another kind, an excluded type
            _message(b, 4, 100), _message(b, 5, 900, kind=2), _message(b, 6, 800, content_type=2),
            # a tie at the newest time: the one stored first
            _message(c, 7, 500), _message(c, 8, 500), _message(c, 9, 400),
            _message(d, 10, 10_000_000_000_000_000_000 // 10**3),
        ])  # fmt: skip
        original = _sql(tmp_path, key, [_rows(f"({_body(_listing_view.ORIGINAL)})")])
        listed = _sql(tmp_path, key, [_rows("conversation_list")])
        assert listed == original
        newest = {row[0].lower(): row[3] for row in listed}  # the message bytes: n
        assert [newest[g] for g in groups] == ["02", "04", "07", "0A", ""]
        # libxmtp's own listing reads through it.
        by_id = {c.id: c.last_message_id for c in await engine.conversations()}
        assert set(groups) <= set(by_id)
        plan = _sql(tmp_path, key, ["EXPLAIN QUERY PLAN SELECT * FROM conversation_list"])
        steps = [row[-1] for row in plan]
        assert any("USING INDEX group_messages_sent_at_sort" in s for s in steps), steps
        assert not any(s.startswith("SCAN gm") or s == "SCAN group_messages" for s in steps)
    finally:
        await engine.close()


async def test_cones_view_of_another_build_is_libxmtps_again_before_libxmtp_opens(
    devnet: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, wallet = os.urandom(32), _client.generate_wallet_key()
    await (await _open(tmp_path, wallet, key, devnet, new=True)).close()
    stale = _listing_view.ours("0000000")
    _sql(tmp_path, key, ["DROP VIEW conversation_list", stale])
    seen: list[str] = []
    real = _opening.open_client

    async def open_client(**kwargs: Any) -> Any:
        seen.append(_view(tmp_path, key))
        return await real(**kwargs)

    monkeypatch.setattr(_opening, "open_client", open_client)
    engine = await _open(tmp_path, wallet, key, devnet, new=False)
    try:
        assert seen == [_listing_view.ORIGINAL]
        assert _view(tmp_path, key) == _ours()
    finally:
        await engine.close()


async def test_a_view_cone_does_not_know_is_left_as_libxmtp_made_it(
    devnet: str, tmp_path: Path
) -> None:
    key, wallet = os.urandom(32), _client.generate_wallet_key()
    await (await _open(tmp_path, wallet, key, devnet, new=True)).close()
    other = _listing_view.ORIGINAL + "\n-- a later libxmtp's"
    _sql(tmp_path, key, ["DROP VIEW conversation_list", other])
    await (await _open(tmp_path, wallet, key, devnet, new=False)).close()
    assert _view(tmp_path, key) == other
