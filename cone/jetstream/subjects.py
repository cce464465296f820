"""The subject scheme: where each identity's messages, replies and outcomes live.

For prefix `P` (default `cone`) and the identity's inbox id `I` (docs/jetstream.md):

| what | subject | stream | consumer |
| --- | --- | --- | --- |
| an inbound message | `P.I.in.<partition>.<conversationId>` | `P-I-in` | `in-<partition>`, one per partition, max 1 unacked |
| a worker's send | `P.I.out.send` | `P-I-out` | `cone` (the daemon's) |
| a worker's reply | `P.I.out.reply` | `P-I-out` | `cone` |
| the outcome of a key | `P.I.outcome.<sha256(key) hex>` | `P-I-outcome` | any (last per subject kept) |

A conversation's partition is the first four bytes of SHA-256 of its id, big-endian,
modulo the partition count: stable across restarts, machines and languages.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: The durable consumer through which the daemon takes workers' replies.
OUT_CONSUMER = "cone"


def partition_of(conversation_id: str, partitions: int) -> int:
    """The partition a conversation's messages go to."""
    digest = hashlib.sha256(conversation_id.encode()).digest()
    return int.from_bytes(digest[:4], "big") % partitions


def key_token(key: str) -> str:
    """A send key as one subject token (keys may hold dots and spaces)."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Layout:
    """The subjects, streams and consumers of one identity."""

    prefix: str
    inbox_id: str
    partitions: int

    @property
    def _root(self) -> str:
        return f"{self.prefix}.{self.inbox_id}"

    def stream(self, part: str) -> str:
        """The stream named `part` (`in`, `out`, `outcome`)."""
        return f"{self.prefix}-{self.inbox_id}-{part}"

    def inbound(self, conversation_id: str) -> str:
        """The subject a message of this conversation is exported on."""
        return f"{self._root}.in.{partition_of(conversation_id, self.partitions)}.{conversation_id}"

    @property
    def inbound_all(self) -> str:
        """Every inbound subject (the inbound stream's)."""
        return f"{self._root}.in.>"

    def partition_filter(self, partition: int) -> str:
        """The subjects of one partition (its consumer's filter)."""
        return f"{self._root}.in.{partition}.*"

    @staticmethod
    def partition_consumer(partition: int) -> str:
        """The durable consumer of one partition."""
        return f"in-{partition}"

    def out(self, method: str) -> str:
        """Where workers publish a `send` or a `reply`."""
        return f"{self._root}.out.{method}"

    @property
    def out_all(self) -> str:
        """Every outbound subject (the outbound stream's)."""
        return f"{self._root}.out.*"

    def outcome(self, key: str) -> str:
        """Where the outcome of a send key is published."""
        return f"{self._root}.outcome.{key_token(key)}"

    @property
    def outcome_all(self) -> str:
        """Every outcome subject (the outcome stream's)."""
        return f"{self._root}.outcome.*"


__all__ = ["OUT_CONSUMER", "Layout", "key_token", "partition_of"]
