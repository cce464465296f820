"""Ingest by message id: minute boundaries, libxmtp's stamps, and healing what was missed."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from cone.config import Paths
from cone.core.intake.reconciliation import WHOLE_AGAIN_NS
from cone.store import Connection, Store, StoredMessage, inbox, load_db_key
from conepb.v1 import cone_pb2 as pb
from support.daemon_clock import DaemonClock
from support.daemons import DaemonProcess
from support.peers import Peer
from support.state import open_store, open_xmtp_db
from support.waiting import receive_n, until


def ffi_text(text: str) -> bytes:
    """A text message's encoded content, as libxmtp stores it."""
    return b"\n\x12\n\x08xmtp.org\x12\x04text\x18\x01\x12\x11\n\x08encoding\x12\x05UTF-8" + (
        b'"' + bytes([len(text.encode())]) + text.encode()
    )


async def _accepted_dm(daemon: DaemonProcess, peer: Peer) -> object:
    contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=peer.address))).contact
    await peer.sync()
    return peer.conversation(bytes.fromhex(contact.conversation_id))


async def test_a_message_early_in_a_minute_after_one_late_in_the_last_arrives(
    home: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    """The stamp of the late one runs ~50 s ahead; the early ones are stamped lower.
    Both the stream path and the read path (a restart's sync) must take them. The
    daemon's clock is the input (support/daemon_clock.py): no wait for a real minute.

    It also detects the libxmtp 1.10 bug cone copes with (docs/guarantees.md): when a
    future libxmtp fixes it, this fails: update the docs, keep the id-based ingest."""
    clock = DaemonClock.at_second(tmp_path, 46)
    async with clock.daemon(home, devnet) as daemon:
        dm = await _accepted_dm(daemon, alice)
        await clock.reach(daemon, 48, 53)
        before = clock.now()
        await alice.send(dm, "late in the minute")
        await receive_n(daemon.client, 1)  # the daemon's libxmtp has stored it
        after = clock.now()
        await daemon.stop()
        await alice.send(dm, "sent while the daemon was down")
        await clock.forward_to(1.5)  # the next minute, by the daemon's clock
        await daemon.restart()  # the restart's sync stores it early in the new minute
        await clock.reach(daemon, 1, 8)  # the daemon's own clock says so
        await alice.send(dm, "early in the next minute")
        got = await receive_n(daemon.client, 3)
        assert [m.text for m in got] == [
            "late in the minute",
            "sent while the daemon was down",
            "early in the next minute",
        ]
        status = await daemon.client.call("Status", pb.StatusRequest())
        assert status.ingest_healed == 0  # taken by the normal paths, not healed later
        await daemon.stop()
    stamps = _stamps_by_text(home)
    late = stamps["late in the minute"]
    # Stored between `before` and `after` by the daemon's clock, stamped that clock
    # plus the seconds within the minute (48-53 here): far beyond anything that happened.
    assert late / 1e9 > after + 10, "inserted_at_ns no longer runs ahead"
    second = before % 60
    assert second - 1 < late / 1e9 - before < second + (after - before) + 1, (late, before)
    # The bad timing really happened: libxmtp's stamps fell back at the boundary.
    assert late > stamps["sent while the daemon was down"], stamps
    assert late > stamps["early in the next minute"], stamps


def _stamps_by_text(home: Path) -> dict[str, int]:
    """libxmtp's insert stamp of each text message in a stopped daemon's database."""
    xmtp = open_xmtp_db(home)
    try:
        rows = xmtp.execute(
            "SELECT decrypted_message_bytes, inserted_at_ns FROM group_messages WHERE kind = 1"
        ).fetchall()
    finally:
        xmtp.close()
    texts = ("late in the minute", "sent while the daemon was down", "early in the next minute")
    return {t: stamp for body, stamp in rows for t in texts if t.encode() in bytes(body)}


def _forget(
    home: Path,
    texts: set[str],
    cursor_ns: int,
    *,
    stored_long_ago: bool = False,
    keep_marks: bool = False,
) -> int:
    """Leave the store as the first release could: messages libxmtp holds that never
    entered the inbox, behind a cursor built on libxmtp's stamps, and (unless
    `keep_marks`) no marks of the start's reconciliation (cone/store/reconciled.py).
    `stored_long_ago`
    (daemon stopped) moves libxmtp's insert stamps of those messages an hour back, as
    for messages skipped long before this start: above that, the start's own read
    (from 10 s before it) takes them in without reconciliation."""
    paths = Paths(home)
    key = load_db_key(key_file=None, default_key_file=paths.default_key_file, store_exists=True)
    store = Store.open(paths.store, key)
    try:

        def forget(conn: Connection) -> list[str]:
            rows = conn.execute("SELECT seq, id, text FROM messages").fetchall()
            gone = [(seq, mid) for seq, mid, text in rows if text in texts]
            for seq, _ in gone:
                conn.execute("DELETE FROM receipts WHERE seq = ?", (seq,))
                conn.execute("DELETE FROM messages WHERE seq = ?", (seq,))
            conn.execute("UPDATE conversations SET ingested_ns = ?", (cursor_ns,))
            if not keep_marks:
                conn.execute("DELETE FROM reconciled")
            return [mid for _, mid in gone]

        ids: list[str] = store.write_now(forget)
    finally:
        store.close()
    if stored_long_ago:
        xmtp = open_xmtp_db(home)
        try:
            xmtp.executemany(
                "UPDATE group_messages SET inserted_at_ns = inserted_at_ns - ? WHERE id = ?",
                [(3600 * 1_000_000_000, bytes.fromhex(mid)) for mid in ids],
            )
        finally:
            xmtp.close()
    return len(ids)


async def test_the_first_start_heals_messages_an_earlier_release_skipped(
    daemon: DaemonProcess, alice: Peer
) -> None:
    dm = await _accepted_dm(daemon, alice)
    texts = [f"message {i}" for i in range(5)]
    for text in texts:
        await alice.send(dm, text)
    await receive_n(daemon.client, 5)
    await daemon.stop()
    lost = {"message 1", "message 3"}
    future = time.time_ns() + 60_000_000_000
    assert _forget(daemon.home, lost, future, stored_long_ago=True) == 2

    await daemon.restart()
    got = await receive_n(daemon.client, 5)
    assert sorted(m.text for m in got) == texts
    assert [m.text for m in got[3:]] == ["message 1", "message 3"]  # in conversation order
    status = await daemon.client.call("Status", pb.StatusRequest())
    assert status.ingest_healed == 2
    assert any("reconciliation" in w for w in status.warnings)
    assert "found 2 message(s)" in daemon.stderr()

    # Healed once: another restart finds nothing more, and the count is kept.
    await daemon.stop()
    await daemon.restart()
    await alice.send(dm, "after healing")
    got = await receive_n(daemon.client, 6)
    assert len({m.message_id for m in got}) == 6
    status = await daemon.client.call("Status", pb.StatusRequest())
    assert status.ingest_healed == 2


async def test_a_catch_up_heals_a_gap_while_the_daemon_runs(
    home: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    clock = DaemonClock.at_second(tmp_path, 58)
    async with clock.daemon(home, devnet) as daemon:
        dm = await _accepted_dm(daemon, alice)
        # Stored early in a minute (the daemon's), the stamps run only seconds ahead; by
        # second 20 every read the daemon makes starts above them, so only
        # reconciliation can find a gap.
        await clock.reach(daemon, 0, 4)
        for i in range(3):
            await alice.send(dm, f"message {i}")
        await receive_n(daemon.client, 3)
        seen = await clock.reach(daemon, 20, 30)
        # The sync after that one began once the daemon's clock was there: its read
        # and every later one start above the stamps.
        await clock.reach(daemon, 20, 30, after=seen)
        # Another connection to the live store removes one: a gap only reconciliation sees.
        assert _forget(daemon.home, {"message 1"}, int(clock.now() * 1e9)) == 1

        async def healed() -> pb.StatusResponse | None:
            status = await daemon.client.call("Status", pb.StatusRequest())
            return status if status.ingest_healed else None

        status = await until(healed)
        assert status.ingest_healed == 1
        got = await receive_n(daemon.client, 3)
        assert sorted(m.text for m in got) == [f"message {i}" for i in range(3)]


async def test_receive_and_send_are_answered_before_a_slow_full_reconciliation_heals(
    daemon: DaemonProcess, alice: Peer, tmp_path: Path
) -> None:
    """The start's full reconciliation runs in the background: held back at its
    first conversation (a failpoint), the daemon still takes in and hands out a new
    message and sends one; once released, the gap it finds still arrives, healed."""
    dm = await _accepted_dm(daemon, alice)
    texts = [f"message {i}" for i in range(4)]
    for text in texts:
        await alice.send(dm, text)
    await receive_n(daemon.client, 4)
    await daemon.stop()
    future = time.time_ns() + 60_000_000_000
    assert _forget(daemon.home, {"message 2"}, future, stored_long_ago=True) == 1

    held, release = tmp_path / "held", tmp_path / "release"
    daemon.env.update(
        CONE_FAILPOINT="reconcile_all",
        CONE_FAILPOINT_FILE=str(held),
        CONE_FAILPOINT_RELEASE=str(release),
    )
    await daemon.restart()
    await until(lambda: asyncio.to_thread(held.exists))
    await alice.send(dm, "while reconciling")
    got = await receive_n(daemon.client, 4)
    assert [m.text for m in got] == ["message 0", "message 1", "message 3", "while reconciling"]
    contact = await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))
    sent = await daemon.client.call(
        "Send",
        pb.SendRequest(to=contact.contact.conversation_id, text="sent meanwhile", key="k1"),
    )
    assert sent.published
    status = await daemon.client.call("Status", pb.StatusRequest())
    assert status.ingest_healed == 0  # nothing is missing until the pass reaches it
    assert not release.exists()  # and it is still held

    release.touch()
    got = await receive_n(daemon.client, 5)
    assert got[-1].text == "message 2"
    status = await daemon.client.call("Status", pb.StatusRequest())
    assert status.ingest_healed == 1

    async def done() -> bool:  # the restart's pass (the first start logged one too)
        return daemon.stderr().count("full reconciliation done") == 2

    await until(done)
    assert "1 conversations, 7 messages compared, 1 healed (1 conversations read whole)" in (
        daemon.stderr()
    )


async def test_the_full_reconciliation_pages_a_long_history_each_message_once(
    daemon: DaemonProcess, alice: Peer
) -> None:
    """1,200 messages in libxmtp's database, 600 of them under one insert stamp (a page
    of one stamp is widened, never cut): the paged pass compares each message once and
    heals exactly the three cone never read, one of them inside the run of equal stamps."""
    dm = await _accepted_dm(daemon, alice)
    await alice.send(dm, "real")
    await receive_n(daemon.client, 1)
    await daemon.stop()
    xmtp = open_xmtp_db(daemon.home)
    try:
        gid, installation, sender, stamp = xmtp.execute(
            "SELECT group_id, sender_installation_id, sender_inbox_id, inserted_at_ns"
            " FROM group_messages WHERE kind = 1"
        ).fetchone()
        old = stamp - 3600 * 1_000_000_000
        rows = [
            (os.urandom(32), gid, ffi_text(f"old {i}"), old + i, installation, sender,
             old + (0 if i < 600 else i))
            for i in range(1200)
        ]  # fmt: skip
        xmtp.executemany(
            "INSERT INTO group_messages (id, group_id, decrypted_message_bytes, sent_at_ns,"
            " kind, sender_installation_id, sender_inbox_id, delivery_status, content_type,"
            " version_major, version_minor, authority_id, originator_id, sequence_id,"
            " inserted_at_ns, should_push) VALUES (?, ?, ?, ?, 1, ?, ?, 2, 1, 1, 0,"
            " 'xmtp.org', 10, 0, ?, 1)",
            rows,
        )
    finally:
        xmtp.close()
    missing = {5, 700, 1199}
    store = open_store(daemon.home)
    try:
        # Stored an hour before the last pass: only a whole read reaches them.
        store.write_now(lambda conn: conn.execute("DELETE FROM reconciled"))
        store.write_now(
            inbox.insert_messages,
            [
                StoredMessage(
                    id=bytes(r[0]).hex(),
                    conversation_id=bytes(gid).hex(),
                    sender_inbox_id=sender,
                    sent_at_ns=r[3],
                    content_type="xmtp.org/text:1.0",
                    text=f"old {i}",
                )
                for i, r in enumerate(rows)
                if i not in missing
            ],
        )
    finally:
        store.close()

    await daemon.restart()

    async def done() -> bool:  # the restart's pass (the first start logged one too)
        return daemon.stderr().count("full reconciliation done") == 2

    await until(done)
    assert "1 conversations, 1202 messages compared, 3 healed" in daemon.stderr()
    got: list[pb.Message] = []
    while len(got) < 1201:  # the real one, and all 1,200 once
        batch = await daemon.client.receive(limit=1000, wait_ms=2000)
        got += batch.messages
        await daemon.client.ack([m.message_id for m in batch.messages])
    assert sorted(m.text for m in got[-3:]) == ["old 1199", "old 5", "old 700"]
    assert len({m.message_id for m in got}) == len(got) == 1201


def _stamped_long_ago(home: Path) -> int:
    """Move every insert stamp in libxmtp's database an hour back (daemon stopped), so
    that what it stored so far lies below any mark a start's pass keeps from now on,
    whatever the second within the minute (libxmtp's stamps run up to ~59 s ahead);
    returns how many messages it holds."""
    xmtp = open_xmtp_db(home)
    try:
        xmtp.execute(
            "UPDATE group_messages SET inserted_at_ns = inserted_at_ns - ?", (3600 * 10**9,)
        )
        return int(xmtp.execute("SELECT count(*) FROM group_messages").fetchone()[0])
    finally:
        xmtp.close()


def _pass_done(daemon: DaemonProcess, n: int) -> Callable[[], Awaitable[str | None]]:
    """The `n`th log line of a finished full reconciliation, once there is one."""

    async def done() -> str | None:
        lines = [ln for ln in daemon.stderr().splitlines() if "full reconciliation done" in ln]
        return lines[n - 1] if len(lines) >= n else None

    return done


async def test_a_start_s_pass_reads_from_where_the_last_one_found_cone_complete(
    daemon: DaemonProcess, alice: Peer
) -> None:
    """The start's pass compares a conversation whole once, then at each later start
    only what libxmtp stored since the last pass began (less the read margin); a gap
    below that mark is the catch-up's count check's to find, once the last whole
    read is `WHOLE_AGAIN_NS` old the pass reads the whole conversation again, and a
    conversation libxmtp stored nothing in since is not read at all."""
    dm = await _accepted_dm(daemon, alice)
    for i in range(4):
        await alice.send(dm, f"old {i}")
    await receive_n(daemon.client, 4)
    await daemon.stop()
    stored = _stamped_long_ago(daemon.home)

    await daemon.restart()  # the DM has no mark yet: read whole
    line = await until(_pass_done(daemon, 2))
    assert (
        f"1 conversations, {stored} messages compared, 0 healed (1 conversations read whole)"
        in line
    )
    await daemon.stop()
    await alice.send(dm, "while stopped 1")
    await alice.send(dm, "while stopped 2")
    # A gap below the mark: a message cone had read, gone from its inbox.
    assert _forget(daemon.home, {"old 1"}, time.time_ns(), keep_marks=True) == 1

    await daemon.restart()  # from the mark: only what this start's sync stored
    line = await until(_pass_done(daemon, 3))
    assert "1 conversations, 2 messages compared, 0 healed (0 conversations read whole)" in line

    async def healed() -> int | None:
        status = await daemon.client.call("Status", pb.StatusRequest())
        return status.ingest_healed or None

    # libxmtp counts more messages than cone has read: the catch-up compares it whole.
    assert await until(healed) == 1
    got = await receive_n(daemon.client, 6)
    assert [m.text for m in got] == ["old 0", "old 2", "old 3", "while stopped 1",
                                     "while stopped 2", "old 1"]  # fmt: skip
    await daemon.stop()

    # A week on (the marks made older rather than the clock later): read whole again.
    store = open_store(daemon.home)
    try:
        store.write_now(
            lambda conn: conn.execute(
                "UPDATE reconciled SET whole_ns = whole_ns - ?", (WHOLE_AGAIN_NS + 10**9,)
            )
        )
    finally:
        store.close()
    await daemon.restart()
    line = await until(_pass_done(daemon, 4))
    assert (
        f"1 conversations, {stored + 2} messages compared, 0 healed (1 conversations read whole)"
        in line
    )
    await daemon.stop()

    # Nothing stored since the mark (by libxmtp's newest stamp): neither the start's
    # read nor its pass reads the conversation.
    _stamped_long_ago(daemon.home)
    await daemon.restart()
    line = await until(_pass_done(daemon, 5))
    assert "1 conversations, 0 messages compared, 0 healed (0 conversations read whole)" in line
    log = daemon.stderr()
    assert "(0 read whole, 0 from where the last pass found cone complete, 1 with " in log
    assert "the start's read 0 of 1)" in log
