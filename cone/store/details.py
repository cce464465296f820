"""What a listing shows of a conversation that only libxmtp knows, kept in cone's store.

A group's name, description, image, member count, and whether this identity is still
a member are libxmtp's: reading them loads the group's state once per value, about
3 ms a group (docs/bench.md, big store). cone keeps the last values it read, and a
counter of the group updates taken in since:

- `changes` counts the group updates (membership, metadata) cone took in for the
  conversation, each counted in the transaction that took it in, and cone's own
  changes to the group, counted when libxmtp has made them. A conversation with no
  row has never been read.
- `read_changes` is what `changes` was before the values were read from libxmtp.

A row is current while `read_changes = changes`; otherwise a listing reads libxmtp
again. libxmtp stores a group update's message in the transaction that applies it,
so a read after the update's message was counted sees the update.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cone.store._db import Connection


@dataclass(frozen=True)
class KnownDetails:
    """A conversation's details as cone last read them from libxmtp."""

    name: str | None
    description: str | None
    image_url: str | None
    member_count: int | None  # None for a DM
    active: bool


@dataclass(frozen=True)
class ReadDetails:
    """Details read from libxmtp, with the `changes` seen before the read."""

    conversation_id: str
    seen_changes: int
    details: KnownDetails


# The columns a listing joins (alias `d`), and how a row of them reads.
COLUMNS = "d.changes, d.read_changes, d.name, d.description, d.image_url, d.member_count, d.active"


def from_row(values: Sequence[Any]) -> tuple[int, KnownDetails | None]:
    """A listing's `COLUMNS`: the conversation's `changes`, and its details if they
    are current (None: never read, or a group update came in since)."""
    changes, read_changes, name, description, image_url, members, active = values
    count = changes or 0
    if read_changes is None or read_changes != count:
        return count, None
    return count, KnownDetails(name, description, image_url, members, bool(active))


def changed(conn: Connection, conversation_ids: Iterable[str]) -> None:
    """Count a group update for each of these conversations (their details are read
    from libxmtp again)."""
    conn.executemany(
        "INSERT INTO details (conversation_id, changes) VALUES (?, 1)"
        " ON CONFLICT (conversation_id) DO UPDATE SET changes = changes + 1",
        [(cid,) for cid in conversation_ids],
    )


def record(conn: Connection, read: Iterable[ReadDetails]) -> None:
    """Keep details read from libxmtp. A read older than the one kept is dropped; one
    that saw fewer changes than counted since is kept but not current."""
    conn.executemany(
        "INSERT INTO details (conversation_id, changes, read_changes, name, description,"
        " image_url, member_count, active) VALUES (?, 0, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (conversation_id) DO UPDATE SET read_changes = excluded.read_changes,"
        " name = excluded.name, description = excluded.description,"
        " image_url = excluded.image_url, member_count = excluded.member_count,"
        " active = excluded.active"
        " WHERE details.read_changes IS NULL OR excluded.read_changes >= details.read_changes",
        [
            (
                r.conversation_id,
                r.seen_changes,
                r.details.name,
                r.details.description,
                r.details.image_url,
                r.details.member_count,
                int(r.details.active),
            )
            for r in read
        ],
    )
