"""While the daemon runs, another process may open its databases (the daemon's own
child reading libxmtp's newest stamps, cone/engine/_stamps.py; an operator's SQLite
shell) and sees what the daemon wrote: the daemon's SQLite locks stay held, so that
process never takes a database for unused, resets its shared memory, or deletes the
write-ahead log the daemon still writes to. Fixing the state directory's permissions
at start once dropped every one of those locks (cone/_fs.py, `make_private`)."""

from __future__ import annotations

import os
from pathlib import Path

from cone.config import STORE_NAME, XMTP_DB_NAME
from cone.store import meta, xmtp_database
from cone.store._db import open_database
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.state import store_key
from support.waiting import receive_n


def _unlinked(pid: int, home: Path) -> list[str]:
    """The daemon's open files of its state directory that are deleted (a write-ahead
    log, shared memory)."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith(str(home)) and target.endswith(" (deleted)"):
            out.append(target)
    return out


def _newest_in_another_process(home: Path, key: bytes, cid: str) -> int:
    request = {"action": "newest", "path": str(home / XMTP_DB_NAME), "key": key.hex(),
               "bound_s": 30}  # fmt: skip
    outcome = xmtp_database.run(request, 40)
    assert "newest" in outcome, outcome
    return int(outcome["newest"][cid])


async def test_another_process_sees_what_the_daemon_wrote_and_deletes_nothing(
    daemon: DaemonProcess, alice: Peer
) -> None:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    cid = contact.conversation_id
    await alice.sync()
    dm = alice.conversation(bytes.fromhex(cid))
    pid = daemon.proc.pid

    # cone's store, read by this process and closed.
    conn = open_database(daemon.home / STORE_NAME, store_key(daemon.home))
    try:
        xmtp_key = meta.get(conn, "xmtp_db_key")
    finally:
        conn.close()
    assert xmtp_key is not None
    assert _unlinked(pid, daemon.home) == []

    stamps = []
    for n, text in enumerate(("one", "two"), 1):
        await alice.send(dm, text)
        assert [m.text for m in await receive_n(daemon.client, n)][-1] == text
        # libxmtp stored it: a process opening its database now sees it.
        stamps.append(_newest_in_another_process(daemon.home, xmtp_key, cid))
        assert _unlinked(pid, daemon.home) == []
    assert 0 < stamps[0] < stamps[1]
