"""cone's index in libxmtp's database (cone/engine/_cursor_index.py): made once libxmtp
has opened it, used by the query libxmtp runs each time it subscribes a message stream,
dropped before libxmtp opens when another libxmtp build made it, and never failing an
opening. Real engines, libxmtp databases and devnet; the tests read and write libxmtp's
database from child processes, as cone does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cone.engine import _client, _cursor_index, _opening
from cone.engine.engine import Engine
from cone.store import xmtp_database

T = TypeVar("T")

#: The shape of xmtp_db's `messages_newer_than` in libxmtp 1.10 (group_message.rs),
#: for two conversations, one with a cursor of two originators and one without.
NEWER_THAN = (
    "SELECT originator_id, sequence_id FROM group_messages WHERE group_id = x''"
    " OR (group_id = ? AND (originator_id = -1"
    " OR (originator_id = 0 AND sequence_id > 5) OR (originator_id = 10 AND sequence_id > 9)"
    " OR originator_id NOT IN (0, 10)))"
    " OR group_id = ?"
)

#: 2,000 messages as libxmtp stores received texts (the columns bench/_bigstore.py fills).
STORED_2000 = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)"
    " INSERT INTO group_messages (id, group_id, decrypted_message_bytes, sent_at_ns, kind,"
    " sender_installation_id, sender_inbox_id, delivery_status, content_type,"
    " version_major, version_minor, authority_id, reference_id, originator_id,"
    " sequence_id, inserted_at_ns, expire_at_ns, should_push)"
    " SELECT randomblob(32), x'01', x'00', i, 1, x'02', 'inbox', 2, 1, 1, 0, 'xmtp.org',"
    " NULL, 10, 0, 0, NULL, 1 FROM n"
)


async def _open(home: Path, wallet: bytes, key: bytes, devnet: str, *, new: bool) -> Engine:
    return await Engine.open(
        api_url=devnet,
        db_path=str(home / "xmtp.db3"),
        db_key=key,
        wallet_key=wallet,
        new=new,
        child=xmtp_database,
    )


def _sql(home: Path, key: bytes, statements: list[str], *params: Any) -> list[Any]:
    """Run `statements` on libxmtp's database in a child process (never in this one,
    where libxmtp may hold it: cone/store/xmtp_database.py); the last one's rows."""
    script = (
        "import json, sys; from pathlib import Path;"
        " from cone.store.xmtp_database import open_xmtp_database as o;"
        " a = json.loads(sys.stdin.read());"
        " c = o(Path(a['path']), bytes.fromhex(a['key'])); rows = [];"
        " [rows := c.execute(s, [bytes.fromhex(p) if isinstance(p, str) else p"
        " for p in (a['params'] if i == len(a['sql']) - 1 else [])]).fetchall()"
        " for i, s in enumerate(a['sql'])];"
        " c.close(); print(json.dumps(rows))"
    )
    request = {
        "path": str(home / "xmtp.db3"), "key": key.hex(), "sql": statements,
        "params": [p.hex() if isinstance(p, bytes) else p for p in params],
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", script], input=json.dumps(request), capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    rows: list[Any] = json.loads(done.stdout)
    return rows


def _indexes(home: Path, key: bytes) -> set[str]:
    rows = _sql(home, key, ["SELECT name FROM sqlite_master WHERE type = 'index'"])
    return {name for (name,) in rows if name.startswith("cone_")}


async def test_libxmtps_stream_setup_reads_the_index_cone_makes(
    devnet: str, tmp_path: Path
) -> None:
    key = os.urandom(32)
    engine = await _open(tmp_path, _client.generate_wallet_key(), key, devnet, new=True)
    try:
        name = _cursor_index.index_name()
        assert _indexes(tmp_path, key) == {name}
        plan = _sql(tmp_path, key, [f"EXPLAIN QUERY PLAN {NEWER_THAN}"], b"a", b"b")
        steps = [row[-1] for row in plan]
        # Every conversation's term reads the index alone, never the table's rows.
        searches = [s for s in steps if s.startswith("SEARCH group_messages")]
        assert len(searches) == 3, steps
        assert all(f"COVERING INDEX {name} " in s for s in searches), steps
        assert await engine.conversations() == []  # libxmtp works on it
    finally:
        await engine.close()


async def test_an_index_of_another_libxmtp_build_is_gone_before_libxmtp_opens(
    devnet: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, wallet = os.urandom(32), _client.generate_wallet_key()
    await (await _open(tmp_path, wallet, key, devnet, new=True)).close()
    stale = "cone_messages_cursor_0000000"
    # As a migration of a later build would refuse: an index on a column it drops.
    _sql(tmp_path, key, [f"CREATE INDEX {stale} ON group_messages (originator_id)"])
    seen: list[set[str]] = []
    real = _opening.open_client

    async def open_client(**kwargs: Any) -> Any:
        seen.append(_indexes(tmp_path, key))
        return await real(**kwargs)

    monkeypatch.setattr(_opening, "open_client", open_client)
    engine = await _open(tmp_path, wallet, key, devnet, new=False)
    try:
        assert seen == [{_cursor_index.index_name()}]
        assert _indexes(tmp_path, key) == {_cursor_index.index_name()}
    finally:
        await engine.close()


async def test_an_index_that_takes_too_long_is_given_up_and_the_engine_opens(
    devnet: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    key, wallet = os.urandom(32), _client.generate_wallet_key()
    await (await _open(tmp_path, wallet, key, devnet, new=True)).close()
    # A store from before cone made the index, with messages enough to take time.
    _sql(tmp_path, key, [f"DROP INDEX {_cursor_index.index_name()}", STORED_2000])
    monkeypatch.setattr(_cursor_index, "MAKE_S", 0.0)
    with caplog.at_level(logging.WARNING, logger="cone.engine._cursor_index"):
        engine = await _open(tmp_path, wallet, key, devnet, new=False)
    try:
        assert _indexes(tmp_path, key) == set()
        assert "not indexed by cursor (given up after 0.0 s)" in caplog.text
        assert await engine.conversations() == []
    finally:
        await engine.close()
    monkeypatch.undo()  # the next opening, given its time, makes it
    await (await _open(tmp_path, wallet, key, devnet, new=False)).close()
    assert _indexes(tmp_path, key) == {_cursor_index.index_name()}


def test_an_unreadable_database_is_left_to_libxmtp_to_report(tmp_path: Path) -> None:
    path = tmp_path / "xmtp.db3"
    _cursor_index.drop_stale(path, os.urandom(32), xmtp_database)  # none yet: nothing to do
    assert not path.exists()
    path.write_bytes(os.urandom(8192))
    (tmp_path / "xmtp.db3.sqlcipher_salt").write_text(os.urandom(16).hex())
    _cursor_index.drop_stale(path, os.urandom(32), xmtp_database)  # neither raises nor writes
    assert not _cursor_index.make(path, os.urandom(32), xmtp_database)
    assert path.stat().st_size == 8192


async def test_making_the_index_stops_when_cone_is_killed(devnet: str, tmp_path: Path) -> None:
    # Left running, an orphaned child would hold libxmtp's database locked while the
    # next start's libxmtp waits on it.
    key = os.urandom(32)
    await (await _open(tmp_path, _client.generate_wallet_key(), key, devnet, new=True)).close()
    _sql(tmp_path, key, [f"DROP INDEX {_cursor_index.index_name()}", _stored(300_000)])
    request = _cursor_index._request("make", tmp_path / "xmtp.db3", key, bound_s=60.0)
    await asyncio.to_thread(_killed_while_making, request)
    assert _indexes(tmp_path, key) == set()


def _stored(n: int) -> str:
    return STORED_2000.replace("i < 2000", f"i < {n}")


def _killed_while_making(request: dict[str, object]) -> None:
    """Run `request` through a process that is killed (-9) as soon as its child runs;
    return once the child has ended."""
    with subprocess.Popen(
        [sys.executable, "-c", "import json, sys; from cone.store import xmtp_database as x;"
         " x.run(json.loads(sys.stdin.readline()), 60)"],
        stdin=subprocess.PIPE, text=True,
    ) as parent:  # fmt: skip
        try:
            assert parent.stdin is not None
            parent.stdin.write(json.dumps(request) + "\n")
            parent.stdin.flush()
            child = _polled(lambda: _child_of(parent.pid))
        finally:
            parent.kill()
    _polled(lambda: _ended(child))


def _polled(probe: Callable[[], T | None], timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    while (value := probe()) is None or value is False:
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return value


def _child_of(pid: int) -> int | None:
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        if children:
            return int(children[0])
    return None


def _ended(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # ended, not yet reaped by whoever adopted it
