"""A big store for benchmarks: N real conversations, then M stored messages in them.

Filling a million messages through the devnet at 100-200 messages a second would take
hours, so the generator makes what only the network can make for real and writes the
rest the way ingest would have left it:

1. **Real conversations** (`base`): a devnet keeping its state in SQLite, a cone
   daemon, and `PEERS` real libxmtp peers. Each peer opens a DM with cone and creates
   groups with cone as the other member (N conversations in all), and sends one text
   into each; cone takes in every welcome and message over its streams, as in real
   traffic, and each conversation is accepted with the `Accept` RPC (so libxmtp's
   consent records say allowed too). The first messages are received and acked.
2. **Stored messages** (`fill`), with the daemon stopped: M - N more text messages,
   written into libxmtp's own database (`group_messages`, SQLCipher, opened with the
   key and salt libxmtp uses) and into cone's store under the same ids, as libxmtp
   and ingest leave a message that arrived: same conversation, the peer's inbox and
   installation as sender, `sent_at_ns` spread over the year before the base was
   made, `inserted_at_ns` just after it (below the point cone's last complete read
   started from, as for history), published, application kind, text content.
   One conversation holds a tenth of them (a long history to page through); the
   rest are spread evenly. All but the last `PENDING` are acked by consumer
   `default`.

What differs from real traffic: the filler messages never crossed the network (the
devnet and the peers' databases do not hold them; a peer's history shows only its
real message), their `sequence_id` is 0, and libxmtp's `last_message_ns` of each
conversation still names the real message.

Each stage is cached in a directory (`--cache`, default under the temporary
directory) and reused: `base-N/` and `store-N-M/`. A run works on a copy.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import Devnet
from cone.engine import _client
from cone.store import Consent, Store, StoredMessage, inbox
from support import daemons
from support.daemons import DaemonProcess
from support.peers import plain_group_options
from support.state import open_xmtp, open_xmtp_db, store_key
from support.waiting import until

PEERS = 10
# A start over thousands of conversations new to cone takes minutes (measured, not a test).
daemons.START_TIMEOUT_S = 3600.0
PENDING = int(os.environ.get("BIGSTORE_PENDING", "10000"))
CHUNK = 20_000
PRODUCTION_PACE = {"CONE_CATCHUP_S": "30"}
_YEAR_NS = 365 * 24 * 3600 * 1_000_000_000


def default_cache() -> Path:
    """Short (Unix socket paths are at most 107 bytes) and kept across runs."""
    return Path(tempfile.gettempdir()) / "cone-bigstore"


@dataclass(frozen=True)
class PeerKeys:
    """What reopens a peer: its wallet key and its database key."""

    name: str
    wallet: str
    db_key: str

    async def open(self, url: str, directory: Path) -> Any:
        """The peer's libxmtp client (the same installation)."""
        return await _client.open_client(
            api_url=url,
            db_path=str(directory / f"{self.name}.db3"),
            db_key=bytes.fromhex(self.db_key),
            wallet_key=bytes.fromhex(self.wallet),
        )


@dataclass(frozen=True)
class Layout:
    """A generated stage: the devnet's database, cone's home and the peers."""

    root: Path

    @property
    def devnet_db(self) -> Path:
        return self.root / "devnet.db"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def peers_dir(self) -> Path:
        return self.root / "peers"

    def peers(self) -> list[PeerKeys]:
        """The peers' keys, as saved."""
        return [PeerKeys(**p) for p in json.loads((self.root / "peers.json").read_text())]

    def conversations(self) -> dict[str, list[str]]:
        """Each peer's conversation ids (its DM first)."""
        loaded: dict[str, list[str]] = json.loads((self.root / "conversations.json").read_text())
        return loaded

    def done(self) -> bool:
        return (self.root / "done").exists()

    def copy_to(self, target: Path) -> Layout:
        """A working copy (a run changes the stores)."""
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(self.root, target, symlinks=True, ignore=shutil.ignore_patterns("*.sock"))
        return Layout(target)


async def _peer_conversations(client: Any, cone_inbox: str, n: int) -> list[str]:
    """A DM and n-1 groups with cone, one text sent into each."""
    dm = await client.conversations().find_or_create_dm(
        cone_inbox, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
    )
    made = [dm]
    for _ in range(n - 1):
        made.append(await client.conversations().create_group([cone_inbox], plain_group_options()))
    ids = []
    for i, conv in enumerate(made):
        await conv.send_text(f"first message {i}")
        ids.append(bytes(conv.id()).hex())
    return ids


async def build_base(cache: Path, n_conversations: int) -> Layout:
    """Real conversations on a devnet kept in SQLite (cached; a build cut short after
    the peers made their conversations resumes there)."""
    base = Layout(cache / f"base-{n_conversations}")
    if base.done():
        return base
    made = (base.root / "conversations.json").exists()
    if base.root.exists() and not made:
        shutil.rmtree(base.root)
    base.root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    async with Devnet(port=0, db=base.devnet_db) as url:
        if not made:
            await _make_conversations(base, url, n_conversations)
            print(f"  {n_conversations} conversations made in {time.monotonic() - started:.0f} s")
        # cone was stopped meanwhile, as an agent offline while they arrived: its
        # libxmtp takes in the welcomes and messages in one sync, unbounded here.
        client = await open_xmtp(base.home, url)
        await client.conversations().sync()
        await client.conversations().sync_all_conversations(None)
        client.release_db_connection()
        print(f"  synced by cone's libxmtp at {time.monotonic() - started:.0f} s")
        async with DaemonProcess(base.home, url, PRODUCTION_PACE) as d:

            async def taken_in() -> bool:
                status = await d.status()
                return bool(
                    status.requests >= n_conversations and status.inbox_messages >= n_conversations
                )

            await until(taken_in, timeout=3600)
            print(f"  taken in by cone at {time.monotonic() - started:.0f} s")
    ids = [cid for i in base.conversations().values() for cid in i]
    await asyncio.to_thread(_accept_all, base, ids)
    (base.root / "done").touch()
    return base


async def _make_conversations(base: Layout, url: str, n_conversations: int) -> None:
    base.peers_dir.mkdir(parents=True)
    base.home.mkdir(mode=0o700)
    async with DaemonProcess(base.home, url, PRODUCTION_PACE) as d:
        cone_inbox = (await d.client.identity()).inbox_id
    keys = [
        PeerKeys(f"peer{i}", _client.generate_wallet_key().hex(), os.urandom(32).hex())
        for i in range(PEERS)
    ]
    (base.root / "peers.json").write_text(json.dumps([k.__dict__ for k in keys]))
    clients = [await k.open(url, base.peers_dir) for k in keys]
    shares = [n_conversations // PEERS + (i < n_conversations % PEERS) for i in range(PEERS)]
    ids = await asyncio.gather(
        *(_peer_conversations(c, cone_inbox, s) for c, s in zip(clients, shares, strict=True))
    )
    for c in clients:
        c.release_db_connection()
    convs = {k.name: i for k, i in zip(keys, ids, strict=True)}
    (base.root / "conversations.json").write_text(json.dumps(convs))


def _accept_all(base: Layout, ids: list[str]) -> None:
    """Accept every conversation as `Accept` does (daemon stopped): cone's consent,
    and libxmtp's consent record of the conversation allowed; every message so far
    received and acked."""
    store = Store.open(base.home / "cone.db", store_key(base.home))
    try:
        store.write_now(_accept_rows)
    finally:
        store.close()
    xdb = open_xmtp_db(base.home)
    try:
        now = time.time_ns()
        xdb.execute("BEGIN IMMEDIATE")
        xdb.executemany(
            "INSERT OR REPLACE INTO consent_records (entity_type, state, entity, consented_at_ns)"
            " VALUES (1, 1, ?, ?)",
            [(cid, now) for cid in ids],
        )
        xdb.execute("COMMIT")
        xdb.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        xdb.close()


def _accept_rows(conn: Any) -> None:
    conn.execute("UPDATE conversations SET consent = ?", (int(Consent.ACCEPTED),))
    ids = [row[0] for row in conn.execute("SELECT id FROM messages")]
    inbox.touch_consumer(conn, "default", 1)
    inbox.ack(conn, "default", ids, 1)


def _shares(n_conversations: int, extra: int) -> list[int]:
    """Filler per conversation: a tenth in the first, the rest spread evenly."""
    big = extra // 10
    rest = extra - big
    each = [
        rest // (n_conversations - 1) + (i < rest % (n_conversations - 1))
        for i in range(n_conversations - 1)
    ]
    return [big, *each]


def fill(base: Layout, cache: Path, n_messages: int) -> Layout:
    """`base` with n_messages stored in all (cached)."""
    n_conversations = sum(len(v) for v in base.conversations().values())
    target = Layout(cache / f"store-{n_conversations}-{n_messages}")
    if target.done():
        return target
    base.copy_to(target.root)
    (target.root / "done").unlink()
    started = time.monotonic()
    xdb = open_xmtp_db(target.home)
    templates: dict[str, tuple[bytes, bytes, str, int, int]] = {}
    for gid, installation, sender, inserted in xdb.execute(
        "SELECT group_id, sender_installation_id, sender_inbox_id, max(inserted_at_ns)"
        " FROM group_messages WHERE kind = 1 GROUP BY group_id"
    ):
        templates[bytes(gid).hex()] = (bytes(gid), bytes(installation), sender, inserted, 0)
    order = [cid for ids in base.conversations().values() for cid in ids]
    shares = _shares(len(order), n_messages - len(order))
    # Interleaved as traffic arrives: each message picks its conversation by weight.
    slots = [i for i, share in enumerate(shares) for _ in range(share)]
    random.Random(1).shuffle(slots)
    first_inserted = min(t[3] for t in templates.values())
    end_ns = first_inserted - 3600 * 1_000_000_000
    step = _YEAR_NS // max(1, len(slots))
    store = Store.open(target.home / "cone.db", store_key(target.home))
    try:
        for lo in range(0, len(slots), CHUNK):
            batch = slots[lo : lo + CHUNK]
            x_rows, c_rows = [], []
            for j, slot in enumerate(batch):
                k = lo + j
                cid = order[slot]
                gid, installation, sender, _, _ = templates[cid]
                mid = os.urandom(32)
                sent = end_ns - _YEAR_NS + k * step
                text = f"stored message {k} in {cid[:8]}"
                x_rows.append(
                    (mid, gid, ffi.encode_text(text), sent, installation, sender, sent + 50_000_000)
                )
                c_rows.append(
                    StoredMessage(
                        id=mid.hex(),
                        conversation_id=cid,
                        sender_inbox_id=sender,
                        sent_at_ns=sent,
                        content_type="xmtp.org/text:1.0",
                        text=text,
                    )
                )
            xdb.execute("BEGIN IMMEDIATE")
            xdb.executemany(
                "INSERT INTO group_messages (id, group_id, decrypted_message_bytes, sent_at_ns,"
                " kind, sender_installation_id, sender_inbox_id, delivery_status, content_type,"
                " version_major, version_minor, authority_id, reference_id, originator_id,"
                " sequence_id, inserted_at_ns, expire_at_ns, should_push)"
                " VALUES (?, ?, ?, ?, 1, ?, ?, 2, 1, 1, 0, 'xmtp.org', NULL, 10, 0, ?, NULL, 1)",
                x_rows,
            )
            xdb.execute("COMMIT")
            acked = min(len(batch), max(0, len(slots) - PENDING - lo))
            store.write_now(_insert, c_rows, acked)
            print(f"\r  {lo + len(batch):,} of {len(slots):,} stored", end="", flush=True)
    finally:
        store.close()
        xdb.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        xdb.close()
    print(f"\n  {n_messages:,} messages in {time.monotonic() - started:.0f} s")
    (target.root / "done").touch()
    return target


def _insert(conn: Any, rows: list[StoredMessage], acked: int) -> None:
    new = inbox.insert_messages(conn, rows)
    assert len(new) == len(rows)
    if acked:
        inbox.ack(conn, "default", [r.id for r in rows[:acked]], 1)


async def generate(cache: Path, n_conversations: int, n_messages: int) -> Layout:
    """The cached store of n_conversations and n_messages, made when missing."""
    await asyncio.to_thread(cache.mkdir, parents=True, exist_ok=True)
    print(f"big store: {n_conversations:,} conversations, {n_messages:,} messages in {cache}")
    base = await build_base(cache, n_conversations)
    return await asyncio.get_running_loop().run_in_executor(None, fill, base, cache, n_messages)
