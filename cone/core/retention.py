"""Peers' deletions and disappearing messages, honoured in cone's own store.

- **Deletions.** A peer's `deleteMessage` (`xmtp.org/deleteMessage`) naming a message
  that same peer sent clears that message's content from cone's store and marks it
  deleted. The deletion is remembered, so a message that arrives after its deletion
  is cleared as soon as it is committed. A deletion naming someone else's message is
  ignored.
- **Disappearing messages.** A conversation's setting (from libxmtp: messages sent
  from `from_ns` on disappear `in_ns` after they were sent) is read at start, when a
  conversation appears, when its metadata changes (a `group_updated` message is taken
  in), and each catch-up period (in a store of more than 500 conversations, a turn
  of them: each at least every 8 periods, cone/core/intake/window_turns.py); messages then
  expire in cone's store on the same schedule (inbox messages by their sent time,
  own messages by the time cone took their key).

What a consumer sees (store.inbox): a removed message it was never handed is
withdrawn from Receive; one already handed out stays pending or acknowledged as it
was, with its content gone and `deleted` or `expired` set. History (`messages`) shows
a deleted message as a stub with `deleted` and no content, and omits expired ones, as
libxmtp does. After content is removed, the store's write-ahead log is checkpointed
so that no older copy of the page stays on disk (the store runs with secure_delete).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from cone.core import content
from cone.core.intake.window_turns import WindowTurns
from cone.engine.port import Identified, RawMessage
from cone.engine.roles.groups import WithGroups
from cone.engine.roles.reads import Reads
from cone.errors import ConeError
from cone.store import Connection, Store, retention

log = logging.getLogger(__name__)

DELETE_TYPE = "xmtp.org/deleteMessage"
# The longest the expiry worker sleeps without being woken (it is woken by news).
MAX_SLEEP_S = 30.0


class RetentionRoles(Identified, Reads, WithGroups, Protocol):
    """What retention uses of the engine: deletions named, and groups' settings."""


class Retention:
    """Applies deletions and disappearing settings to cone's store."""

    def __init__(
        self,
        store: Store,
        engine: RetentionRoles,
        conversation_ids: Callable[[], Awaitable[list[str]]],
        refresh_interval_s: float,
    ) -> None:
        self._store = store
        self._engine = engine
        self._conversation_ids = conversation_ids
        self._refresh_interval_s = refresh_interval_s
        self._waiting: set[str] = set()  # conversations with a deletion not yet applied
        self._seen: set[str] = set()  # deletion message ids already recorded
        self._settings: dict[str, tuple[int, int]] = {}
        # The conversations each period's refresh reads (all, or a turn of them).
        self._turns: WindowTurns[str] = WindowTurns(str)
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Load what is pending and the settings cone recorded, and start expiring."""
        self._waiting = await self._store.read(retention.waiting_deletions)
        self._settings = await self._store.read(retention.disappearing)
        self._tasks = [asyncio.create_task(self._expire_forever(), name="expiry")]

    def watch_settings(self) -> None:
        """Read the settings from libxmtp now, then every period, in the background:
        the core calls this once its start is done, so that the start neither waits
        for 10,000 conversations' settings nor competes with its own reads."""
        self._tasks.append(
            asyncio.create_task(self._refresh_forever(), name="disappearing-settings")
        )

    async def stop(self) -> None:
        """Stop the workers."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def after_commit(
        self, conversation_id: str, raws: list[RawMessage], unread: list[RawMessage]
    ) -> None:
        """Ingest's hook: messages of a conversation were just read from libxmtp,
        `unread` of them for the first time."""
        deletions = []
        for raw in raws:
            target = self._deletion(raw)
            if target is not None and raw.id not in self._seen:
                deletions.append((raw.id, target, raw.sender_inbox_id))
        if deletions or conversation_id in self._waiting:
            await self._apply(conversation_id, deletions)
        # A group update may change the setting: read it when one is taken in. One
        # read before (the start's full reconciliation reads messages again)
        # had its setting read then; the periodic refresh is the net for a crash
        # between the two.
        if any(not raw.application for raw in unread):
            await self.refresh([conversation_id])
        if conversation_id in self._settings:
            self._wake.set()

    def published(self, conversation_id: str) -> None:
        """The outbox's hook: an own message was just published (its settle record
        queued); in a disappearing conversation the expiry worker looks again."""
        if conversation_id in self._settings:
            self._wake.set()

    def _deletion(self, raw: RawMessage) -> str | None:
        """The id a peer's deleteMessage names, or None for any other message."""
        if not raw.application or raw.sender_inbox_id == self._engine.inbox_id:
            return None
        if b"deleteMessage" not in raw.content[:64]:
            return None
        if not content.decode(raw.content).content_type.startswith(DELETE_TYPE):
            return None
        return self._engine.deleted_message_id(raw.content)

    async def _apply(self, cid: str, deletions: list[tuple[str, str, str]]) -> None:
        now = time.time_ns()
        pairs = [(target, sender) for _, target, sender in deletions]

        def write(conn: Connection) -> tuple[list[str], int]:
            retention.record_deletions(conn, cid, pairs, now)
            return retention.apply_deletions(conn, cid, now)

        cleared, waiting = await self._store.write(write)
        self._seen.update(d[0] for d in deletions)
        if waiting:
            self._waiting.add(cid)
        else:
            self._waiting.discard(cid)
        if cleared:
            log.info("%s: %d message(s) deleted by their senders", cid, len(cleared))
            await self._store.read(retention.checkpoint)

    async def refresh(self, conversation_ids: list[str]) -> None:
        """Read these conversations' disappearing settings from libxmtp."""
        if not conversation_ids:
            return
        found = await self._engine.groups.disappearing(conversation_ids)
        settings: dict[str, tuple[int, int] | None] = {
            cid: found.get(cid) for cid in conversation_ids
        }
        if await self._store.write(retention.set_disappearing, settings):
            self._settings = await self._store.read(retention.disappearing)
            self._wake.set()

    async def refresh_quietly(self, conversation_ids: list[str]) -> None:
        """`refresh`, logging a failure (the next catch-up period reads it again)."""
        try:
            await self.refresh(conversation_ids)
        except ConeError as exc:
            log.warning("reading disappearing settings failed: %s", exc)

    async def _refresh_forever(self) -> None:
        while True:
            try:
                await self.refresh_quietly(self._turns.next(await self._conversation_ids()))
            except Exception:  # the worker's boundary: a failed pass must not end it
                log.exception("reading disappearing settings failed; trying next period")
            await asyncio.sleep(self._refresh_interval_s)

    async def expire_now(self) -> int:
        """Clear what is due; how many messages."""
        if not self._settings:
            return 0  # no conversation disappears: no write at all
        removed = await self._store.write(retention.expire, time.time_ns())
        if removed:
            log.info("%d message(s) expired by disappearing settings", removed)
            await self._store.read(retention.checkpoint)
        return removed

    async def _expire_forever(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.expire_now()
                due = await self._store.read(retention.next_due) if self._settings else None
            except Exception:  # the worker's boundary: a failed pass must not end expiry
                log.exception("expiring messages failed; trying again shortly")
                due = None
            wait = MAX_SLEEP_S if due is None else max(0.0, (due - time.time_ns()) / 1e9)
            try:
                async with asyncio.timeout(min(wait, MAX_SLEEP_S)):
                    await self._wake.wait()
            except TimeoutError:
                pass
