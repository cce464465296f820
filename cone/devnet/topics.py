"""D14N topics and originators: how one store's rows are named in the decentralized view.

A topic is one kind byte followed by an identifier. An originator is who sequenced
a payload; its sequence ids strictly increase. The devnet keeps one id sequence
per table (its V3 ids) and names each row the way XMTP's migrator names V3 data
republished on D14N, keeping the V3 id as the sequence id:

| row | originator | sequence id |
| --- | --- | --- |
| commit (either API) | 0 (the chain's group-message broadcaster) | V3 id |
| identity update (either API) | 1 (the chain's identity broadcaster) | V3 sequence id |
| application message via V3 | 10 | V3 id |
| welcome via V3 | 11 | V3 id |
| key package via V3 | 13 | its row id |
| anything else via D14N | 100 (the devnet's own node id) | V3 id |

So every row has both names, a V3 client and a D14N client read the same history,
and a client's cursors stay valid across the two APIs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from cone.errors import InvalidArgument

KIND_GROUP_MESSAGES: Final = 0
KIND_WELCOME_MESSAGES: Final = 1
KIND_IDENTITY_UPDATES: Final = 2
KIND_KEY_PACKAGES: Final = 3

ORIGINATOR_COMMITS: Final = 0
ORIGINATOR_IDENTITY: Final = 1
ORIGINATOR_V3_MESSAGES: Final = 10
ORIGINATOR_V3_WELCOMES: Final = 11
ORIGINATOR_V3_KEY_PACKAGES: Final = 13
#: The devnet's own node id: the originator of what D14N clients publish, and the
#: id GetNodes names it by.
NODE_ID: Final = 100

#: xmtpd's limits: topic length, and entries in a cursor.
MAX_TOPIC_BYTES: Final = 128
MAX_CURSOR_ENTRIES: Final = 100

_KIND_NAMES: Final = {
    KIND_GROUP_MESSAGES: "group messages",
    KIND_WELCOME_MESSAGES: "welcome messages",
    KIND_IDENTITY_UPDATES: "identity updates",
    KIND_KEY_PACKAGES: "key packages",
}


def topic(kind: int, identifier: bytes) -> bytes:
    """The topic of an identifier of a kind."""
    return bytes([kind]) + identifier


def identity_topic(inbox_id: str) -> bytes:
    """The topic of an inbox's identity updates: its id's bytes, hex-decoded."""
    return topic(KIND_IDENTITY_UPDATES, bytes.fromhex(inbox_id))


def split(raw: bytes, field: str) -> tuple[int, bytes]:
    """A topic's kind and identifier; InvalidArgument for an empty, oversized or
    unknown one."""
    if not 1 < len(raw) <= MAX_TOPIC_BYTES:
        raise InvalidArgument(
            f"{field} has {len(raw)} bytes; a topic is a kind byte and an identifier, "
            f"at most {MAX_TOPIC_BYTES} bytes",
            field=field,
        )
    if raw[0] not in _KIND_NAMES:
        raise InvalidArgument(f"{field} has unknown kind {raw[0]} (0 to 3 are served)", field=field)
    return raw[0], raw[1:]


def kind_name(kind: int) -> str:
    """A topic kind's name, for messages."""
    return _KIND_NAMES.get(kind, f"kind {kind}")


def cursor_of(entries: Mapping[int, int], field: str) -> dict[int, int]:
    """A request's cursor as a dict; InvalidArgument above xmtpd's entry limit."""
    if len(entries) > MAX_CURSOR_ENTRIES:
        raise InvalidArgument(
            f"{field} has {len(entries)} originators, above the limit of {MAX_CURSOR_ENTRIES}",
            field=field,
        )
    return {int(k): int(v) for k, v in entries.items()}
