"""History benchmarks: `messages` paging and `conversations` listing, each against the
same queries on plain SQLite in the same run.

    python -m bench history [--conversations 1000] [--messages 10000] [--page 100] [--rounds 5]

- conversations: list every one of N conversations (half with a saved contact, a few
  messages each) a page of 50 at a time over cone.sock, against the same SQL
  (`cone.store.history.conversations`) on plain SQLite, in process.
- messages: page through one conversation of M messages (every tenth one cone's own,
  from the outbox) both ways, `limit` per page, over cone.sock, against the same SQL
  (`cone.store.history.messages`) on plain SQLite, in process, own messages decoded
  into the record as the daemon decodes them (`cone.core.model`).

Each walk runs `rounds` times, cone's and the baseline's in turn, so both see the same
load; each figure is the round with the median total time. A last line times the parts
of a page in process (store read on SQLCipher, on the store's thread, and on plain
SQLite, the hop to the store's thread and back, core mapping, proto).

The floor: whatever a daemon's own code costs, a page through one pays at least a call
across the process boundary (the daemon's cheapest call, `Identity`: both gRPC ends and
the socket, as many calls as a walk has pages, in the same rounds) on top of the
baseline's page. Their sum against the baseline is the least ratio any daemon could
reach on this machine that day.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from cone.core import content
from cone.core.model import Message, own_message
from cone.daemon.convert import add_messages
from cone.devnet import Devnet
from cone.store import (
    Connection,
    Consent,
    ContactRecord,
    Kind,
    OwnMessage,
    Store,
    StoredMessage,
    conversations,
    history,
    inbox,
)
from cone.store._migrations import migrate
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, short_home
from support.state import store_key

BIG = "b1" * 16
SENDER = "ab" * 32
OWN = "cd" * 32
PRODUCTION_PACE = {"CONE_CATCHUP_S": "30"}
#: One walk: items seen, seconds in all, each page's seconds.
Walk = tuple[int, float, list[float]]


def fill(conn: Connection, n_conversations: int, n_messages: int) -> None:
    """N accepted conversations with 3 messages each, half with a contact; one more
    conversation with M messages, every tenth one an own message in the outbox."""
    rows: list[StoredMessage] = []
    for c in range(n_conversations):
        cid = f"{c:032x}"
        peer = f"{c:064x}"
        conversations.ensure(conn, cid, Kind.DM, peer, Consent.ACCEPTED, 1_000 + c)
        if c % 2 == 0:
            conversations.save_contact(conn, ContactRecord(peer, f"c{c}", f"0x{c:040x}", cid))
        rows += [
            StoredMessage(
                id=f"f{c:031x}{i:032x}",
                conversation_id=cid,
                sender_inbox_id=peer,
                sent_at_ns=10_000 + i,
                content_type=content.TEXT,
                text=f"message {i} of conversation {c}",
            )
            for i in range(3)
        ]
    inbox.insert_messages(conn, rows)
    conversations.ensure(conn, BIG, Kind.DM, SENDER, Consent.ACCEPTED, 1)
    big = []
    for i in range(n_messages):
        if i % 10 == 9:
            _, payload = content.encode(text=f"own message {i}", key=f"k{i}")
            conn.execute(
                "INSERT INTO outbox (key, conversation_id, destination, content_type, payload,"
                " message_id, state, created_ns, settled_ns)"
                " VALUES (?, ?, ?, ?, ?, ?, 'settled', ?, ?)",
                (f"k{i}", BIG, BIG, content.TEXT, payload, f"{i:064x}", 1_000_000 + i, 0),
            )
        else:
            big.append(
                StoredMessage(
                    id=f"{i:064x}",
                    conversation_id=BIG,
                    sender_inbox_id=SENDER,
                    sent_at_ns=1_000_000 + i,
                    content_type=content.TEXT,
                    text=f"history message {i}",
                )
            )
    inbox.insert_messages(conn, big)


def _plain(n_conversations: int, n_messages: int, work: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(work / "plain.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    migrate(conn)  # type: ignore[arg-type]  # the same DB-API surface
    conn.execute("BEGIN IMMEDIATE")
    fill(conn, n_conversations, n_messages)  # type: ignore[arg-type]
    conn.execute("COMMIT")
    return conn


def _timed(pages: list[float]) -> str:
    return f"p50 {statistics.median(pages) * 1000:.2f} ms/page"


async def _walk_conversations(call: Callable[[str | None], Any]) -> Walk:
    seen, cursor, pages = 0, None, []
    start = time.perf_counter()
    while True:
        t = time.perf_counter()
        found, cursor = await call(cursor)
        pages.append(time.perf_counter() - t)
        seen += len(found)
        if cursor is None:
            return seen, time.perf_counter() - start, pages


async def _calls(call: Callable[[], Any], n: int) -> Walk:
    """`n` calls one after another, each timed."""
    times = []
    start = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        await call()
        times.append(time.perf_counter() - t)
    return n, time.perf_counter() - start, times


async def _walk_messages(call: Callable[[str | None, bool], Any], oldest_first: bool) -> Walk:
    seen, cursor, pages = 0, None, []
    start = time.perf_counter()
    while True:
        t = time.perf_counter()
        found, more = await call(cursor, oldest_first)
        pages.append(time.perf_counter() - t)
        seen += len(found)
        if not more:
            return seen, time.perf_counter() - start, pages
        cursor = found[-1]


def _median(walks: list[Walk]) -> Walk:
    """The round with the median total time (its pages' times with it)."""
    return sorted(walks, key=lambda w: w[1])[len(walks) // 2]


async def _main(args: argparse.Namespace) -> None:
    n_conv, n_msg, page, rounds = args.conversations, args.messages, args.page, args.rounds
    n_pages = -(-n_msg // page)  # a walk's pages, and as many calls for the floor
    home = short_home()
    with tempfile.TemporaryDirectory() as work:
        plain = _plain(n_conv, n_msg, Path(work))
        async with Devnet(port=0) as url, DaemonProcess(home, url, PRODUCTION_PACE) as d:
            await d.stop()
            store = Store.open(home / "cone.db", store_key(home))
            try:
                store.write_now(fill, n_conv, n_msg)
            finally:
                store.close()
            await d.start()

            async def cone_conversations(cursor: str | None) -> tuple[list[Any], str | None]:
                request = pb.ConversationsRequest(limit=50)
                if cursor is not None:
                    request.cursor = cursor
                r = await d.client.call("Conversations", request)
                return list(r.conversations), r.cursor if r.HasField("cursor") else None

            async def cone_messages(cursor: str | None, oldest: bool) -> tuple[list[str], bool]:
                request = pb.MessagesRequest(conversation_id=BIG, limit=page, oldest_first=oldest)
                if cursor is not None:
                    setattr(request, "after" if oldest else "before", cursor)
                r = await d.client.call("Messages", request)
                return [m.message_id for m in r.messages], r.more

            async def plain_conversations(cursor: str | None) -> tuple[list[Any], str | None]:
                return history.conversations(
                    plain,  # type: ignore[arg-type]
                    consumer="default", consent=None, kind=None, limit=50, cursor=cursor,
                )  # fmt: skip

            async def plain_messages(cursor: str | None, oldest: bool) -> tuple[list[str], bool]:
                query = functools.partial(
                    history.messages,
                    plain,  # type: ignore[arg-type]
                    conversation_id=BIG, limit=page, oldest_first=oldest,
                )  # fmt: skip
                rows, more = query(
                    after=cursor if oldest else None, before=None if oldest else cursor
                )
                # What the daemon does too: own messages decoded into the record.
                found = [own_message(r, OWN, 0) if isinstance(r, OwnMessage) else r for r in rows]
                return [m.id for m in found], more

            walks: dict[str, list[Walk]] = {}
            for _ in range(rounds):
                for name, walk in (
                    ("conv", lambda: _walk_conversations(cone_conversations)),
                    ("base_conv", lambda: _walk_conversations(plain_conversations)),
                    ("fwd", lambda: _walk_messages(cone_messages, True)),
                    ("base_fwd", lambda: _walk_messages(plain_messages, True)),
                    ("back", lambda: _walk_messages(cone_messages, False)),
                    ("base_back", lambda: _walk_messages(plain_messages, False)),
                    ("identity", lambda: _calls(d.client.identity, n_pages)),
                ):
                    walks.setdefault(name, []).append(await walk())
        store = Store.open(home / "cone.db", store_key(home))
        try:
            parts = _breakdown(store, plain, page)
            parts["the hop to the store's thread and back (median)"] = await _hop(store, page)
        finally:
            store.close()
        plain.close()

    def line(what: str, cone: Walk, base: Walk) -> None:
        print(
            f"{what}: cone {cone[0] / cone[1]:,.0f}/s ({cone[1]:.3f} s, {_timed(cone[2])}); "
            f"plain SQLite {base[0] / base[1]:,.0f}/s ({base[1]:.3f} s, {_timed(base[2])}); "
            f"{cone[1] / base[1]:.1f}x the time "
            f"({statistics.median(cone[2]) / statistics.median(base[2]):.1f}x at p50)"
        )

    for name, found in walks.items():
        want = n_conv + 1 if name.endswith("conv") else n_msg
        if name == "identity":
            want = n_pages
        assert all(w[0] == want for w in found), (name, [w[0] for w in found])
    m = {name: _median(found) for name, found in walks.items()}
    print(f"medians of {rounds} rounds")
    line(f"conversations: {n_conv + 1} listed, 50 a page", m["conv"], m["base_conv"])
    line(f"messages oldest first: {n_msg}, {page} a page", m["fwd"], m["base_fwd"])
    line(f"messages newest first: {n_msg}, {page} a page", m["back"], m["base_back"])
    call = statistics.median(m["identity"][2]) * 1000
    base = statistics.median(m["base_back"][2]) * 1000
    print(
        f"floor of a page through a daemon: {call:.2f} ms (the daemon's cheapest call, "
        f"Identity, p50) + {base:.2f} ms (plain SQLite's page, newest first, p50) = "
        f"{call + base:.2f} ms: at least {(call + base) / base:.1f}x plain SQLite at p50"
    )
    print(
        f"in process, a page of {page} newest first (best of 3 walks): "
        + ", ".join(f"{what} {ms:.2f} ms" for what, ms in parts.items())
    )


def _breakdown(store: Store, plain: sqlite3.Connection, page: int) -> dict[str, float]:
    """Where a page's time goes inside the daemon, each part timed alone in process."""

    def pages(read: Callable[..., Any]) -> list[list[StoredMessage | OwnMessage]]:
        found, cursor, more = [], None, True
        while more:
            rows, more = read(
                history.messages, conversation_id=BIG, before=cursor, after=None,
                limit=page, oldest_first=False,
            )  # fmt: skip
            found.append(rows)
            cursor = rows[-1].id if rows else None
        return found

    def plain_read(fn: Callable[..., Any], **kw: Any) -> Any:
        return fn(plain, **kw)

    def on_its_thread() -> None:
        """Every page read on the store's thread in one call: SQLCipher's own part."""

        def walk(conn: Connection) -> None:
            pages(lambda fn, **kw: fn(conn, **kw))

        store.read_now(walk)

    def mapped(rows: list[StoredMessage | OwnMessage]) -> list[Message]:
        return [own_message(r, OWN, 0) if isinstance(r, OwnMessage) else r for r in rows]

    def best(work: Callable[[], object], n: int) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
        return min(times) / n * 1000

    stored = pages(store.read_now)
    messages = [mapped(rows) for rows in stored]
    n = len(stored)
    sqlcipher = best(on_its_thread, n)
    return {
        "store read on SQLCipher": sqlcipher,
        "on plain SQLite": best(lambda: pages(plain_read), n),
        "core mapping": best(lambda: [mapped(rows) for rows in stored], n),
        "proto and its bytes": best(lambda: [_response(found) for found in messages], n),
    }


async def _hop(store: Store, page: int) -> float:
    """What a page pays on top of its read for crossing to the store's thread and
    back, awaited as the daemon awaits it (`Store.read`): the median over 3 walks'
    pages of each page's await less its read on the thread, in ms."""
    hops = []
    for _ in range(3):
        cursor, more = None, True
        while more:
            inside = 0.0

            def timed(conn: Connection, before: str | None) -> Any:
                nonlocal inside
                start = time.perf_counter()
                try:
                    return history.messages(
                        conn, conversation_id=BIG, before=before, after=None, limit=page,
                        oldest_first=False,
                    )  # fmt: skip
                finally:
                    inside = time.perf_counter() - start

            start = time.perf_counter()
            rows, more = await store.read(timed, cursor)
            hops.append(time.perf_counter() - start - inside)
            cursor = rows[-1].id if rows else None
    return statistics.median(hops) * 1000


def _response(found: list[Message]) -> bytes:
    """A Messages answer's bytes, built as the servicer builds it."""
    response = pb.MessagesResponse(more=True)
    add_messages(response.messages, found)
    return response.SerializeToString()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench history", description=__doc__)
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(_main(parser.parse_args(argv)))
