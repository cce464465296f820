"""Pending messages for benchmarks: written straight into a stopped daemon's store.

Real peers send about 150 messages a second here; a drain benchmark needs 10,000
or 100,000 already in the inbox, in an accepted conversation.
"""

from __future__ import annotations

from pathlib import Path

from cone.store import Connection, Consent, Kind, Store, StoredMessage, conversations, inbox
from cone.store.keys import load_db_key

CONVERSATION = "be" * 16
SENDER = "ab" * 32


def messages(n: int) -> list[StoredMessage]:
    """`n` text messages from one sender in one conversation."""
    return [
        StoredMessage(
            id=f"{i:064x}",
            conversation_id=CONVERSATION,
            sender_inbox_id=SENDER,
            sent_at_ns=i,
            content_type="xmtp.org/text:1.0",
            text=f"bench message {i}",
        )
        for i in range(n)
    ]


def fill(conn: Connection, n: int) -> None:
    """Insert `n` pending messages in an accepted conversation (inside a transaction)."""
    conversations.ensure(conn, CONVERSATION, Kind.DM, SENDER, Consent.ACCEPTED, 1)
    inbox.insert_messages(conn, messages(n))


def fill_home(home: Path, n: int) -> None:
    """`fill` the store of a state directory whose daemon is stopped."""
    key = load_db_key(key_file=None, default_key_file=home / "db.key", store_exists=True)
    store = Store.open(home / "cone.db", key)
    try:
        store.write_now(fill, n)
    finally:
        store.close()
