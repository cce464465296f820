"""Send and Reply: one logical message per key, whatever crashes in between.

The key protocol, in order:
1. The first payload and the exact conversation for a key are committed to the
   outbox (encrypted, synced) before anything else happens. Concurrent sends'
   claims share one commit (group commit, cone/store/_group.py); each send goes on
   only once its own claim is synced.
2. libxmtp prepares the message locally (unpublished, its intent to publish
   queued). Its id is not written separately: after a crash before step 3 is
   recorded, the prepared message is found again through the key it carries
   (`cone.key` in the envelope), so a key never gets a second prepared message.
   The conversation's lock is let go here: its next send is claimed and prepared
   while this one is published, and libxmtp publishes whatever the conversation
   has queued in one cycle, in the order it was queued.
3. The message is published (steps 2 and 3 are one call into libxmtp, one worker
   hop). The send answers once the node has it: at its echo on the message stream,
   or when libxmtp's call returns, whichever comes first (cone/core/publication.py).
   The key settles with the message id then, in one write queued without waiting
   for it: publishing a prepared message again is harmless, so a crash that loses
   the settle record only repeats step 3.
A failed publication leaves the key `failing`; a per-conversation worker retries
with backoff, so one failing conversation never holds back another. A failure that
is final for now (the node's V3 cutover; a node that does not know this identity,
asked through `NetworkWatch` after the failure) fails the call with its own reason,
and the key waits `RETRY_MAX_S` between attempts, its reason in status.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from cone.core import content
from cone.core.intake.ingest import READ_MARGIN_NS
from cone.core.network import NetworkWatch, identity_unknown
from cone.core.publication import Publications
from cone.core.ratelimit import WriteBudget
from cone.core.restore_fence import RESTORE_FORKED, RestoreFence
from cone.engine.port import NodeView
from cone.engine.roles.publishing import Publishing
from cone.engine.roles.reads import Reads
from cone.errors import (
    IDENTITY_UNKNOWN,
    UNKNOWN_CONVERSATION,
    V3_CUTOVER,
    ConeError,
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    RateLimited,
    Unavailable,
)
from cone.store import Store, outbox
from cone.store.outbox import OutboxRecord

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_START_S = 1.0
RETRY_MAX_S = 300.0
#: How long a backup waits for the sends in flight when it holds them (Outbox.held).
HOLD_WAIT_S = 30.0


class OutboxRoles(Reads, Publishing, Protocol):
    """What the outbox uses of the engine: publishing, and its own messages read back."""


@dataclass(frozen=True)
class SendResult:
    """What Send and Reply return."""

    message_id: str
    conversation_id: str
    deduplicated: bool
    published: bool
    retry_after_ms: int | None = None
    #: How many ids the call acknowledged with its claim (Reply's `ack_message_ids`).
    acknowledged: int = 0


def check_content(c: content.Outgoing) -> None:
    """Data must be JSON text (a gRPC client may send any string; the JSON surfaces only
    JSON). Every other rule of the content is the proto's, checked at the daemon's edge."""
    if c.data_json is not None:
        try:
            json.loads(c.data_json)
        except ValueError:
            raise InvalidArgument("data is not valid JSON", field="data") from None


def _backoff_ns(attempts: int) -> int:
    delay = min(RETRY_START_S * 2 ** max(0, attempts - 1), RETRY_MAX_S)
    return time.time_ns() + int(delay * (0.5 + random.random()) * 1e9)


class Outbox:
    """Owns the send path and its retries."""

    def __init__(
        self,
        store: Store,
        engine: OutboxRoles,
        network: NetworkWatch | None = None,
        fence: RestoreFence | None = None,
        on_published: Callable[[str], None] = lambda conversation_id: None,
    ) -> None:
        self._store = store
        self._engine = engine
        self._network = network
        self._fence = fence
        # Sends between their claim and their prepared message (the backup's hold).
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._open = asyncio.Event()
        self._open.set()
        # One lock per conversation: a conversation's sends publish in order, and a
        # slow or failing conversation never holds another's lock.
        self._locks: dict[str, asyncio.Lock] = {}
        self._retry_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._all_due = False
        self._budget = WriteBudget()
        #: Publications (cone/core/publication.py), some answered and still finishing.
        self.publications = Publications(engine, failed=self._failed_after)
        #: Told each conversation a message was just published in (its settle record
        #: queued): the message stream's echo of an own send never reaches the core
        #: (cone/engine/_echoes.py), so whatever watches own messages hears it here.
        self.on_published = on_published

    def _lock(self, conversation_id: str) -> asyncio.Lock:
        return self._locks.setdefault(conversation_id, asyncio.Lock())

    def start(self) -> None:
        """Resume unsettled keys now and keep retrying failed ones."""
        self._retry_task = asyncio.create_task(self._retry_forever(), name="outbox")

    def retry_now(self) -> None:
        """Retry every unsettled key now, whatever its backoff (the network is back)."""
        self._all_due = True
        self._wake.set()

    async def stop(self) -> None:
        """Stop retrying (unsettled keys resume at the next start)."""
        if self._retry_task is not None:
            self._retry_task.cancel()
            await asyncio.gather(self._retry_task, return_exceptions=True)
        await self.publications.stop()

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold every send until the block ends, with each key the outbox holds
        prepared in libxmtp first: a snapshot taken inside has no key between its
        claim and its prepared message, so a copy restored from it publishes each
        pending key as the same message id as the original would (peers keep a
        message id once), never as a second message (docs/backup.md)."""
        self._open.clear()
        try:
            try:
                async with asyncio.timeout(HOLD_WAIT_S):
                    await self._idle.wait()
            except TimeoutError:
                raise Unavailable(
                    f"sends still in flight after {HOLD_WAIT_S:.0f} s (is the network slow?): "
                    "try the backup again",
                    reason="backup_busy",
                ) from None
            for rec in await self._store.read(outbox.unsettled):
                if rec.message_id is None:
                    found = await self._find_prepared(rec)
                    message_id = found or await self._engine.prepare(
                        rec.conversation_id, rec.payload
                    )
                    await self._store.write(outbox.prepared, rec.key, message_id)
            yield
        finally:
            self._open.set()

    @contextlib.asynccontextmanager
    async def _sending(self) -> AsyncIterator[None]:
        """One send or retry from its claim on (waits while a backup holds sends)."""
        await self._open.wait()
        self._in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    async def send(
        self,
        *,
        key: str,
        destination: str,
        conversation_id: str,
        require_accepted: bool,
        record_unknown: Callable[[str], Awaitable[object]],
        message: content.Outgoing,
        reply_to: str | None,
        reply_to_inbox_id: str | None = None,
        ack_consumer: str = "",
        ack_message_ids: Sequence[str] = (),
    ) -> SendResult:
        """Send one logical message for `key` into `conversation_id` (the caller has
        checked the content with `check_content`; the proto's rules hold at the edge).

        One write claims the key (or finds it) and, for a new key, checks that the
        conversation is accepted when `require_accepted`; `record_unknown` lets cone
        record a conversation libxmtp knows but the store does not yet. The same
        write acknowledges `ack_message_ids` for `ack_consumer` (Reply's turn
        acknowledgement), unless the key belongs to another message (a conflict):
        once it commits, the message is durably the outbox's to deliver, whatever
        the publication below does.
        """
        kind = message.kind
        ctype, payload = content.encode(
            content=message, reply_to=reply_to, reply_to_inbox_id=reply_to_inbox_id, key=key
        )
        claim = functools.partial(
            outbox.claim,
            key=key,
            conversation_id=conversation_id,
            destination=destination,
            content_type=_kind_of(ctype, payload),
            payload=payload,
            require_accepted=require_accepted,
            ack_consumer=ack_consumer,
            ack_message_ids=ack_message_ids,
        )
        async with self._sending(), _Turn(self._lock(conversation_id)) as turn:
            try:
                rec, created, acked = await self._store.write_grouped(claim, now_ns=time.time_ns())
            except NotFound as err:
                if err.reason != UNKNOWN_CONVERSATION:
                    raise
                await record_unknown(conversation_id)
                rec, created, acked = await self._store.write_grouped(claim, now_ns=time.time_ns())
            if created:
                result = await self._deliver(rec, deduplicated=False, turn=turn)
                return replace(result, acknowledged=acked)
        async with self._sending():
            again = await self._again(rec, conversation_id, kind)
        return replace(again, acknowledged=acked)

    async def _again(self, rec: OutboxRecord, conversation_id: str, kind: str) -> SendResult:
        """A key seen before: the same logical message, or a conflict."""
        if rec.content_type != kind:
            raise Conflict(
                f"key {rec.key!r} was first used for {rec.content_type} content, not {kind}: "
                "a key names one message; use a new key for a new message",
                reason="key_conflict",
                field="key",
            )
        if conversation_id != rec.conversation_id:
            raise Conflict(
                f"key {rec.key!r} was first used for conversation {rec.conversation_id}: "
                "a key names one message; use a new key for a new message",
                reason="key_conflict",
                field="key",
            )
        if rec.state == "settled":
            assert rec.message_id is not None
            return SendResult(rec.message_id, rec.conversation_id, True, True)
        async with self._lock(rec.conversation_id):
            current = await self._store.read(outbox.get, rec.key)
            assert current is not None
            return await self._deliver(current, deduplicated=True)

    async def _deliver(
        self, rec: OutboxRecord, *, deduplicated: bool, turn: _Turn | None = None
    ) -> SendResult:
        """Prepare (if needed) and publish; the caller holds the conversation's lock.
        A new key's send (`turn`, its hold on that lock) lets the lock go as soon as
        its message is queued in libxmtp: the conversation's next send is prepared
        behind it while it is published, and goes out in the same publication when
        it is queued in time."""
        if rec.state == "settled":
            assert rec.message_id is not None
            return SendResult(rec.message_id, rec.conversation_id, deduplicated, True)
        message_id = rec.message_id
        if message_id is None and turn is None:
            message_id = await self._find_prepared(rec)
        prepared: list[str] = []  # the id, once libxmtp has stored the message
        wait_s = self._budget.take()
        try:
            if self._fence is not None:
                await self._fence.check(rec.conversation_id)
            if wait_s:
                if message_id is None:
                    message_id = await self._engine.prepare(rec.conversation_id, rec.payload)
                raise RateLimited(
                    "XMTP's write budget (about 3,000 per 5 minutes) is used up",
                    retry_after_ms=int(wait_s * 1000),
                )
            # A new message's id is not recorded here: a crash before settle finds it
            # again by its key.
            answered = await self.publications.publish(
                rec, message_id, prepared, self._publish, queued=turn.end if turn else None
            )
        except Unavailable as err:
            message_id = message_id or (prepared[0] if prepared else None)
            final = await self._final()
            if final is not None:
                await self._hold(rec, message_id, final)
                raise final from err
            if message_id is None:
                # Not prepared: the key's payload is safe in the outbox; the worker
                # tries again, and the caller is told (there is no message id yet).
                await self._store.write(
                    outbox.fail, rec.key, None, err, _backoff_ns(rec.attempts + 1)
                )
                self._wake.set()
                raise
            return await self._wait(rec, message_id, err, deduplicated)
        except RateLimited as err:
            message_id = message_id or (prepared[0] if prepared else None)
            if message_id is None:
                raise
            return await self._wait(rec, message_id, err, deduplicated)
        except FailedPrecondition as err:
            if err.reason not in (V3_CUTOVER, RESTORE_FORKED):
                raise
            # Final for now (until cone moves to D14N; until a member re-adds this
            # restored installation): the key keeps its payload, is retried rarely
            # (in case the node was misconfigured), and the caller is told.
            await self._hold(rec, message_id or (prepared[0] if prepared else None), err)
            raise
        # The node has it (libxmtp's call may still be reading the conversation back:
        # cone/core/publication.py).
        self._settled(rec, answered.message_id)
        return SendResult(answered.message_id, rec.conversation_id, deduplicated, True)

    def _settled(self, rec: OutboxRecord, message_id: str) -> None:
        """Record a published key settled. Not awaited (it joins the next group
        commit): if a crash loses this record, the key is found pending, its prepared
        message is found by key, and publishing it again is harmless."""
        self._store.write_soon(outbox.settle, rec.key, message_id, time.time_ns())
        self.on_published(rec.conversation_id)
        log.debug("message out %s in %s (key %r)", message_id, rec.conversation_id, rec.key)

    async def _failed_after(self, rec: OutboxRecord, message_id: str, err: ConeError) -> None:
        """libxmtp's call failed after the node had the message (the key settled at
        the answer): failing again, its message published again soon."""
        await self._store.write(
            outbox.fail, rec.key, message_id, err, _backoff_ns(rec.attempts + 1)
        )
        self._wake.set()

    async def _publish(self, publishing: Awaitable[T]) -> T:
        """Await a publication, or give up waiting once the node says it does not
        know this identity: libxmtp's publication then hangs until its bound (minutes)."""
        if self._network is None:
            return await publishing
        publish = asyncio.ensure_future(publishing)
        abandoned: list[bool] = []

        def abandon() -> None:
            abandoned.append(True)
            publish.cancel()  # libxmtp's call runs out its own bound on its worker

        forget = self._network.when_forgotten(abandon)
        try:
            return await publish
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not abandoned or (current is not None and current.cancelling()):
                raise  # this caller was cancelled, not the publication abandoned
            raise Unavailable(
                "publishing a message stopped: the node forgot this identity",
                reason=IDENTITY_UNKNOWN,
            ) from None
        finally:
            forget()

    async def _final(self) -> FailedPrecondition | None:
        """A failed publication's final reason for now, if the node gives one: it
        does not know this identity (libxmtp says only "Sync failed to wait for
        intent")."""
        if self._network is None:
            return None
        answer = await self._network.check()
        if answer.view is NodeView.IDENTITY_UNKNOWN:
            return identity_unknown(self._network.api_url, answer.detail)
        return None

    async def _hold(self, rec: OutboxRecord, message_id: str | None, err: ConeError) -> None:
        """Record a final failure: the key keeps its payload and is tried rarely."""
        next_ns = time.time_ns() + int(RETRY_MAX_S * 1e9)
        await self._store.write(outbox.fail, rec.key, message_id, err, next_ns)

    async def _wait(
        self,
        rec: OutboxRecord,
        message_id: str,
        err: Unavailable | RateLimited,
        deduplicated: bool,
    ) -> SendResult:
        """Record a failure worth retrying soon; the send answers `published: false`."""
        next_ns = _backoff_ns(rec.attempts + 1)
        if err.retry_after_ms is not None:
            next_ns = max(next_ns, time.time_ns() + err.retry_after_ms * 1_000_000)
        await self._store.write(outbox.fail, rec.key, message_id, err, next_ns)
        self._wake.set()
        log.warning("send %r waits in the outbox: %s", rec.key, err.message)
        retry_ms = max(0, (next_ns - time.time_ns()) // 1_000_000)
        return SendResult(message_id, rec.conversation_id, deduplicated, False, retry_ms)

    async def _find_prepared(self, rec: OutboxRecord) -> str | None:
        """After a crash between prepare and its record: find the message by its key."""
        since = max(0, rec.created_ns - READ_MARGIN_NS)
        for m in await self._engine.own_messages(rec.conversation_id, since):
            if content.decode(m.content).send_key == rec.key:
                return m.id
        return None

    async def _retry_forever(self) -> None:
        while True:
            try:
                await self._retry_round()
            except Exception:  # the worker's boundary: a failed round must not end retries
                log.exception("outbox retry round failed; trying again shortly")
                await asyncio.sleep(RETRY_START_S)

    async def _retry_round(self) -> None:
        """Retry what is due, then wait until the next key is due or a send fails."""
        # Cleared first: a send that fails while this round runs wakes the next one.
        self._wake.clear()
        all_due, self._all_due = self._all_due, False
        pending = await self._store.read(outbox.unsettled)
        now = time.time_ns()
        due = [
            r for r in pending if all_due or r.next_attempt_ns is None or r.next_attempt_ns <= now
        ]
        by_conv: dict[str, list[OutboxRecord]] = {}
        for r in due:
            by_conv.setdefault(r.conversation_id, []).append(r)
        await asyncio.gather(*(self._retry_conversation(rs) for rs in by_conv.values()))
        later = [
            r.next_attempt_ns for r in pending if r.next_attempt_ns and r.next_attempt_ns > now
        ]
        timeout = min(later) / 1e9 - time.time() if later else None
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def _retry_conversation(self, records: list[OutboxRecord]) -> None:
        for rec in records:
            async with self._sending(), self._lock(rec.conversation_id):
                current = await self._store.read(outbox.get, rec.key)
                if current is None or current.state == "settled":
                    continue
                # Asked first: against a node that does not know this identity libxmtp's
                # publication hangs for minutes before it fails.
                final = await self._final()
                if final is not None:
                    await self._hold(current, current.message_id, final)
                    log.warning("send %r is held in the outbox: %s", rec.key, final.message)
                    return
                try:
                    result = await self._deliver(current, deduplicated=True)
                except ConeError as err:  # recorded on the key; the next round retries
                    log.warning("retrying send %r failed: %s", rec.key, err.message)
                    return
                if not result.published:
                    return  # keep this conversation's order; the next round retries

    async def unsettled(self) -> list[OutboxRecord]:
        """Keys not yet published, for status."""
        return await self._store.read(outbox.unsettled)


class _Turn:
    """A send's hold on its conversation's lock, which it may end before its block
    does (`end`, once its message is queued in libxmtp); the block's end ends it
    otherwise."""

    def __init__(self, lock: asyncio.Lock) -> None:
        self._lock = lock
        self._held = False

    async def __aenter__(self) -> _Turn:
        await self._lock.acquire()
        self._held = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.end()

    def end(self) -> None:
        """Let the conversation's next send go on (once; later calls do nothing)."""
        if self._held:
            self._held = False
            self._lock.release()


def _kind_of(content_type: str, payload: bytes) -> str:
    """The content kind a key is bound to: its content type (a reply: the type it wraps)."""
    if content_type == content.REPLY:
        return content.reply_inner_type(payload)
    return content_type
