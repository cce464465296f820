"""Group context: unaddressed messages kept for the next turn that addresses the agent.

The bridge acknowledges an unaddressed group message on its own consumer at once (so
the long poll does not return it again and again) and keeps it in memory. Durability
comes from a second consumer, `CONSUMER.context`, on which such messages stay pending
until a turn hands them to the command as context; every other message is
acknowledged there when its turn ends (or when recovery finds it). After a crash,
`recover()` reads that consumer's pending group messages back into memory. A crash
between the two acknowledgements can hand a message over as context twice; never
zero times.

At most `cap` messages are held per conversation (the newest); older ones are
acknowledged on the context consumer and dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, Protocol

from cone.bridge._turns import Turn, kind
from cone.rules import field_rules
from conepb.v1 import cone_pb2 as pb

log = logging.getLogger("cone.bridge")


class Caller(Protocol):
    """What the bridge calls the core through (its socket's channel pool, or the core
    in process when the bridge hosts it)."""

    async def call(self, rpc: str, request: Any, timeout: float | None = None) -> Any: ...


async def ack(caller: Caller, ids: Iterable[str], consumer: str) -> None:
    """Acknowledge `ids` for `consumer`, in calls of at most ACK_IDS_MAX."""
    todo = list(dict.fromkeys(ids))
    most = field_rules("AckRequest", "message_ids").repeated.max_items
    for i in range(0, len(todo), most):
        chunk = todo[i : i + most]
        await caller.call("Ack", pb.AckRequest(message_ids=chunk, consumer=consumer), timeout=60)


class Gathered:
    """Acknowledgements on one consumer that nobody waits for, gathered: what is
    queued while a call runs goes out in the next one, so a burst of turns makes a
    few calls (and commits), not one each. `send` is given each batch (and reports
    its failure: the ids stay pending, to be acknowledged again later); `start`
    runs the sending as a task its owner stops with it."""

    def __init__(
        self,
        send: Callable[[list[str]], Awaitable[None]],
        start: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
    ) -> None:
        self._send = send
        self._start = start
        self._queued: list[str] = []
        self._draining: asyncio.Task[None] | None = None

    def add(self, ids: Iterable[str]) -> None:
        """Queue `ids` for the next call."""
        self._queued.extend(ids)
        if self._draining is None or self._draining.done():
            self._draining = self._start(self._drain())

    async def _drain(self) -> None:
        while self._queued:
            ids, self._queued = self._queued, []
            await self._send(ids)


class Context:
    """Held context per group conversation, backed by the context consumer."""

    def __init__(self, caller: Caller, consumer: str, cap: int) -> None:
        self.caller = caller
        self.consumer = consumer
        self.cap = cap
        self.held: dict[str, list[pb.Message]] = {}

    def hold(self, messages: Iterable[pb.Message]) -> list[str]:
        """Keep `messages`; returns the ids that fell off the cap (to ack here)."""
        dropped: list[str] = []
        for m in messages:
            held = self.held.setdefault(m.conversation_id, [])
            if any(h.message_id == m.message_id for h in held):
                continue
            held.append(m)
            held.sort(key=lambda h: h.sequence)
            while len(held) > self.cap:
                dropped.append(held.pop(0).message_id)
        return dropped

    def _before(self, turn: Turn) -> list[pb.Message]:
        """Held messages of the turn's conversation that precede its last message
        (after a restart, recovery may also hold later ones: they wait for the next)."""
        last = max((m.sequence for m in turn.messages), default=0)
        mine = set(turn.ack_ids)
        held = self.held.get(turn.conversation_id, [])
        return [m for m in held if m.sequence < last or m.message_id in mine]

    def for_turn(self, turn: Turn) -> list[pb.Message]:
        """The context to hand to `turn`: held plus inline, oldest first, capped."""
        addressed = {m.message_id for m in turn.messages}
        merged = {m.message_id: m for m in self._before(turn)}
        merged.update({m.message_id: m for m in turn.inline_context})
        out = sorted((m for i, m in merged.items() if i not in addressed), key=lambda m: m.sequence)
        return out[-self.cap :] if self.cap else []

    def to_ack(self, turn: Turn) -> list[str]:
        """What `turn` acknowledges on the context consumer: its messages and the
        context it is handed (all held messages up to its last one)."""
        return [*turn.ack_ids, *(m.message_id for m in self._before(turn))]

    def forget(self, turn: Turn) -> None:
        """The turn ended: stop holding the context it was handed."""
        ids = {m.message_id for m in self._before(turn)}
        rest = [m for m in self.held.get(turn.conversation_id, []) if m.message_id not in ids]
        if rest:
            self.held[turn.conversation_id] = rest
        else:
            self.held.pop(turn.conversation_id, None)

    async def consumed(self, turn: Turn) -> None:
        """The turn ended: forget its context and ack `to_ack` on the context consumer."""
        ids = self.to_ack(turn)
        self.forget(turn)
        await ack(self.caller, ids, self.consumer)

    async def recover(self) -> None:
        """Load the context consumer's pending group messages (after a restart)."""
        excluded: list[str] = []
        while True:
            batch = await self.caller.call(
                "Receive",
                pb.ReceiveRequest(
                    consumer=self.consumer,
                    limit=field_rules("ReceiveRequest", "limit").uint32.lte,
                    wait_ms=0,
                    exclude_conversation_ids=excluded,
                ),
                timeout=60,
            )
            messages = list(batch.messages)
            drop = [m.message_id for m in messages if kind(m) == "dm"]
            drop += self.hold(m for m in messages if kind(m) == "group")
            if drop:
                await ack(self.caller, drop, self.consumer)
            if not batch.more:
                break
            if not drop:  # all held: page on by leaving these conversations out
                excluded = sorted({*excluded, *(m.conversation_id for m in messages)})
        if self.held:
            n = sum(len(v) for v in self.held.values())
            log.info("recovered %d context messages in %d groups", n, len(self.held))


__all__ = ["Caller", "Context", "Gathered", "ack"]
