"""Reading one D14N topic from the store, as envelopes in id (storage) order.

Ids are the V3 ids, one sequence per table, so id order is the order the devnet
accepted the rows: a commit always comes before the messages sent after it, which
is the order libxmtp's causal sort needs. A page cut anywhere in that order leaves
every originator's remaining rows above the cursor the client keeps, so the next
page continues without a gap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cone.devnet import envelopes, topics
from cone.devnet.store import Store
from conepb.xmtpv4 import envelopes_pb2 as env


@dataclass(frozen=True, slots=True)
class Read:
    """One envelope read, with the row id it was stored under."""

    id: int
    envelope: env.OriginatorEnvelope


def read_topic(
    store: Store, kind: int, identifier: bytes, cursor: Mapping[int, int], after: int, limit: int
) -> list[Read]:
    """The topic's envelopes above `cursor` (originator to sequence id; absent
    counts as 0) and above row id `after`, in id order, at most `limit`."""
    if kind == topics.KIND_GROUP_MESSAGES:
        rows = store.group_envelopes(identifier, cursor, after, limit)
        return [Read(r.id, envelopes.group_message(r)) for r in rows]
    if kind == topics.KIND_WELCOME_MESSAGES:
        welcomes = store.welcome_envelopes(identifier, cursor, after, limit)
        return [Read(r.id, envelopes.welcome(r)) for r in welcomes]
    if kind == topics.KIND_IDENTITY_UPDATES:
        inbox_id = identifier.hex()
        since = max(after, cursor.get(topics.ORIGINATOR_IDENTITY, 0))
        updates = store.identity_updates(inbox_id, since)[:limit]
        return [Read(u.sequence_id, envelopes.identity_update(inbox_id, u)) for u in updates]
    row = store.key_package_row(identifier)
    if row is None or row.id <= max(after, cursor.get(row.originator, 0)) or limit < 1:
        return []
    return [Read(row.id, envelopes.key_package(row))]


def has_above(store: Store, kind: int, identifier: bytes, cursor: Mapping[int, int]) -> bool:
    """Whether the topic may hold envelopes above `cursor`: False only when it holds
    none, known for group and welcome topics from their newest ids without a read."""
    if kind == topics.KIND_GROUP_MESSAGES:
        newest_ids = store.newest_group_message_ids(identifier)
    elif kind == topics.KIND_WELCOME_MESSAGES:
        newest_ids = store.newest_welcome_ids(identifier)
    else:
        return True
    return any(i > cursor.get(originator, 0) for originator, i in newest_ids.items())


def newest(store: Store, kind: int, identifier: bytes) -> env.OriginatorEnvelope | None:
    """The topic's newest envelope, if any."""
    if kind == topics.KIND_GROUP_MESSAGES:
        message = store.newest_group_message(identifier)
        return None if message is None else envelopes.group_message(message)
    if kind == topics.KIND_WELCOME_MESSAGES:
        welcome = store.newest_welcome(identifier)
        return None if welcome is None else envelopes.welcome(welcome)
    if kind == topics.KIND_IDENTITY_UPDATES:
        inbox_id = identifier.hex()
        update = store.newest_identity_update(inbox_id)
        return None if update is None else envelopes.identity_update(inbox_id, update)
    key_package = store.key_package_row(identifier)
    return None if key_package is None else envelopes.key_package(key_package)
