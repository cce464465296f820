"""The bridge's loop: long-poll, form turns, run them concurrently, reply, ack, park.

Turns in different conversations run concurrently, up to `concurrency`; a
conversation with a turn in progress (running, or waiting to retry) is left out of
the long poll (`excludeConversationIds`), so its turns never overlap. When a turn's
messages are acknowledged, the outstanding long poll is cancelled (its messages stay
pending) and a new one starts with the updated exclusions: the conversation is polled
again at once, while the turn's last bookkeeping (a group turn's ack on the context
consumer) goes on. A DM turn does that ack as its command starts instead, so that
nothing of the turn but the journal's (unsynced) line is left where the conversation's
next message is ingested and polled.

A turn that exits 0 is answered with `Reply` under the key `reply:<turn id>`, and the
turn's messages are acknowledged by that same call (`ackMessageIds`; with several
replies, by the last): the core commits the acknowledgement in the transaction that
claims the reply's key, so a crash keeps both or neither. Before that commit the
command runs again and the same key makes the second reply a no-op; after it, nothing
runs again. A turn with no reply (blank stdout) is acknowledged with `Ack`. A failing
attempt (non-zero exit, a signal, `--timeout`) is retried with backoff; after
`max_attempts` the turn is parked (see `_journal`).

Failures of the core are classified by `ConeError.retryable`: the core unreachable or
rate-limited is retried with backoff; anything else is deterministic and never retried
as if it were transient. A refused Reply parks its turn; a refused Receive or Ack stops
the bridge with that error (logged once; `cone bridge` exits with its exit code), since
the bridge could only fail the same way again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cone.bridge._agent import Outcome, kill_leftover, run_agent
from cone.bridge._context import Caller, Context, Gathered, ack
from cone.bridge._env import agent_environment
from cone.bridge._files import TurnFiles, files_root
from cone.bridge._journal import Journal, Parked
from cone.bridge._replies import replies
from cone.bridge._turns import Rules, Turn, plan
from cone.errors import ConeError
from cone.rules import field_rules
from cone.schema import message_to_json
from conepb.v1 import cone_pb2 as pb

log = logging.getLogger("cone.bridge")

POLL_WAIT_MS: Final = 30_000
#: Test hooks: `after-reply` exits the bridge right after the Reply that acknowledged
#: its turn (before the journal forgets the turn); `between-replies` exits it after
#: the first of a turn's several replies (before the one that acknowledges).
CRASH_HOOK_ENV: Final = "CONE_BRIDGE_TEST_CRASH"
_BACKOFF_CAP_S: Final = 60.0
#: The most ids one Reply acknowledges (a larger turn is acknowledged with Ack).
_REPLY_ACK_MAX: Final = field_rules("ReplyRequest", "ack_message_ids").repeated.max_items


@dataclass(frozen=True)
class BridgeConfig:
    """What `cone bridge` was asked to do."""

    argv: list[str]
    consumer: str = "bridge"
    alias: str | None = None
    concurrency: int = 4
    timeout_s: float = 300.0
    max_attempts: int = 5
    backoff_s: float = 1.0
    context_cap: int = 50
    batch: int = 100
    home: Path | None = None
    #: Variables of the bridge's environment passed on to the agent beyond the allow-list.
    pass_env: tuple[str, ...] = ()
    reactions: bool = False

    @property
    def context_consumer(self) -> str:
        """The consumer on which held group context stays pending."""
        return f"{self.consumer}.context"


def _fsync_closing(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def retry_delay(base: float, attempt: int) -> float:
    """Seconds before retry `attempt + 1`: base doubling, capped, ±20 % jitter."""
    delay = min(base * 2.0 ** (attempt - 1), _BACKOFF_CAP_S)
    return float(delay * random.uniform(0.8, 1.2))


class Bridge:
    """One bridge over a reached core. `await bridge.run(stop)` until `stop` is set."""

    def __init__(
        self, caller: Caller, config: BridgeConfig, journal: Journal, identity: dict[str, Any]
    ) -> None:
        self.caller = caller
        self.config = config
        self.journal = journal
        self.identity = identity
        self.context = Context(caller, config.context_consumer, config.context_cap)
        self.files = TurnFiles(caller, files_root(config.home, config.consumer))
        self.rules = Rules(config.alias, config.reactions, str(identity.get("inboxId", "")))
        # The turn holding each conversation (left out of the long poll).
        self.running: dict[str, asyncio.Task[None]] = {}
        # Every turn's task until it ends (a released turn may still be finishing).
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        # A deterministic failure inside a turn, to stop the bridge with.
        self._fatal: ConeError | None = None
        # DM turns' acknowledgements on the context consumer, gathered (`_started`).
        self._dm_context = Gathered(self._ack_context, self._background)
        # Two threads per running command: spawning, then waiting for it.
        self._threads = ThreadPoolExecutor(config.concurrency * 2, "cone-agent")

    async def run(self, stop: asyncio.Event) -> None:
        """Recover held context, then serve turns until `stop` is set."""
        self.files.clean()
        for turn_id, pid in list(self.journal.pids.items()):
            if kill_leftover(pid, turn_id):
                log.warning("killed the command left running by a crash (pid %d)", pid)
            self.journal.running(turn_id, None)
        stopped = asyncio.create_task(stop.wait())
        try:
            recover = asyncio.create_task(self._transient("recover context", self.context.recover))
            await asyncio.wait({recover, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not recover.done():
                recover.cancel()
                return
            recover.result()
            await self._loop(stopped)
        finally:
            stopped.cancel()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._threads.shutdown(wait=False)

    async def _loop(self, stopped: asyncio.Task[Any]) -> None:
        delay = 0.2
        while not stopped.done():
            if self._fatal is not None:
                raise self._fatal
            self._changed.clear()
            changed = asyncio.create_task(self._changed.wait())
            if len(self.running) >= self.config.concurrency:
                await asyncio.wait({changed, stopped}, return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
                continue
            poll = asyncio.create_task(self._receive(sorted(self.running)))
            await asyncio.wait({poll, changed, stopped}, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            if not poll.done():
                poll.cancel()  # a turn ended (or stop): its messages stay pending
            try:
                batch: pb.ReceiveResponse = await poll
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                continue
            except ConeError as err:
                if not err.retryable:
                    log.error("receive refused (%s: %s); stopping", err.reason, err.message)
                    raise
                log.warning("receive failed (%s); retrying in %.1f s", err.message, delay)
                await asyncio.wait({stopped}, timeout=delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.2
            if batch.messages and not stopped.done():
                await self._dispatch(list(batch.messages))

    async def _receive(self, exclude: list[str]) -> pb.ReceiveResponse:
        request = pb.ReceiveRequest(
            consumer=self.config.consumer,
            limit=self.config.batch,
            wait_ms=POLL_WAIT_MS,
            exclude_conversation_ids=exclude,
        )
        result: pb.ReceiveResponse = await self.caller.call(
            "Receive", request, timeout=POLL_WAIT_MS / 1000 + 30
        )
        return result

    async def _dispatch(self, batch: list[pb.Message]) -> None:
        p = plan(batch, self.config.alias, self.journal.open_turns, self.rules)
        for cid in p.stale:
            self.journal.finish(cid)
        if p.context:
            dropped = self.context.hold(p.context)
            try:
                await ack(self.caller, [m.message_id for m in p.context], self.config.consumer)
                if dropped:
                    await ack(self.caller, dropped, self.config.context_consumer)
            except ConeError as err:  # they come back in the next batch; held once
                if not err.retryable:
                    log.error("acknowledging context refused (%s: %s)", err.reason, err.message)
                    raise
                log.warning("acknowledging context failed (%s); will retry", err.message)
            log.info("held %d unaddressed group messages as context", len(p.context))
        for turn in p.turns:
            if len(self.running) >= self.config.concurrency:
                break  # the rest stay pending for a later poll
            self.running[turn.conversation_id] = self._background(self._turn(turn))

    async def _transient(self, what: str, fn: Any) -> Any:
        """Await `fn()`, retrying while the failure is retryable (the core may be
        restarting, or rate-limited); a deterministic failure is raised at once."""
        delay = 0.2
        while True:
            try:
                return await fn()
            except ConeError as err:
                if not err.retryable:
                    raise
                log.warning("%s failed (%s); retrying in %.1f s", what, err.message, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _stdin(
        self, turn: Turn, context: list[pb.Message], attempt: int
    ) -> tuple[bytes, Path | None]:
        """The turn's JSON, with its attachments written as files (and their directory)."""
        messages = [message_to_json(m) for m in turn.messages]
        held = [message_to_json(m) for m in context]
        directory = await self.files.write(turn.turn_id, [*messages, *held])
        body = {
            "turnId": turn.turn_id,
            "attempt": attempt,
            "maxAttempts": self.config.max_attempts,
            "conversationId": turn.conversation_id,
            "conversationType": turn.conversation_type,
            "replyKey": turn.reply_key,
            "identity": self.identity,
            "alias": self.config.alias,
            "messages": messages,
            "context": held,
        }
        return json.dumps(body, ensure_ascii=False).encode(), directory

    def _env(self, turn: Turn, attempt: int, directory: Path | None) -> dict[str, str]:
        env = dict(
            CONE_TURN_ID=turn.turn_id,
            CONE_ATTEMPT=str(attempt),
            CONE_CONVERSATION_ID=turn.conversation_id,
            CONE_CONVERSATION_TYPE=turn.conversation_type,
            CONE_MESSAGE_IDS=",".join(m.message_id for m in turn.messages),
            CONE_REPLY_KEY=turn.reply_key,
            CONE_INBOX_ID=str(self.identity.get("inboxId", "")),
        )
        if self.config.home is not None:
            env["CONE_HOME"] = str(self.config.home)
        if directory is not None:
            env["CONE_TURN_DIR"] = str(directory)
        return agent_environment(os.environ, self.config.pass_env, env)

    async def _turn(self, turn: Turn) -> None:
        cid = turn.conversation_id
        try:
            context = self.context.for_turn(turn)
            while True:
                attempt = self.journal.begin(cid, turn.turn_id, turn.ack_ids, sync=False)
                try:
                    await self._journal_synced()
                except asyncio.CancelledError:
                    self.journal.withdraw(cid)  # stopped before the command started
                    raise
                if attempt > self.config.max_attempts:  # exhausted before a restart
                    last = self.journal.open_turns[cid].last_error or "attempts exhausted"
                    await self._park(turn, attempt - 1, last)
                    return
                log.info(
                    "turn %s in %s %s: attempt %d, %d messages, %d context",
                    turn.turn_id[:12], turn.conversation_type, cid[:12], attempt,
                    len(turn.messages), len(context),
                )  # fmt: skip
                stdin, directory = await self._stdin(turn, context, attempt)
                try:
                    outcome = await run_agent(
                        self.config.argv,
                        stdin,
                        self._env(turn, attempt, directory),
                        self.config.timeout_s,
                        lambda pid: self._started(turn, pid),
                        self._threads,
                    )
                except asyncio.CancelledError:
                    self.journal.withdraw(cid)  # our shutdown is not the command's failure
                    raise
                except OSError as err:
                    outcome = Outcome(127, b"")
                    log.error("cannot start the agent command: %s", err)
                finally:
                    self.journal.running(turn.turn_id, None)
                if outcome.ok:
                    await self._answer(turn, outcome.stdout, attempt)
                    return
                reason = outcome.describe()
                self.journal.failed(cid, reason)
                if attempt >= self.config.max_attempts:
                    await self._park(turn, attempt, reason)
                    return
                delay = retry_delay(self.config.backoff_s, attempt)
                log.warning(
                    "turn %s attempt %d failed (%s); retrying in %.1f s",
                    turn.turn_id[:12], attempt, reason, delay,
                )  # fmt: skip
                await asyncio.sleep(delay)
        except ConeError as err:
            # Deterministic (_transient retried the rest): the same call would fail
            # the same way, so stop the bridge with it rather than rerun the turn
            # forever. Its messages stay pending.
            log.error(
                "turn %s in %s: the core refused (%s: %s); stopping",
                turn.turn_id, cid, err.reason, err.message,
            )  # fmt: skip
            self._fatal = err
        except OSError as err:
            # The journal could not be written (a full disk, which may clear): the
            # messages stay pending; hold the conversation back a while so that the
            # next poll does not spin on it.
            log.error("turn %s in %s stopped: %s; retrying later", turn.turn_id, cid, err)
            await asyncio.sleep(retry_delay(max(self.config.backoff_s, 1.0), 3))
        finally:
            self.files.remove(turn.turn_id)
            self._release(cid)

    async def _journal_synced(self) -> None:
        """The journal's lines so far made durable, the fsync on a thread: the event
        loop serves the other turns and the long poll meanwhile."""
        fd = self.journal.log_copy()
        if fd is not None:
            await asyncio.get_running_loop().run_in_executor(self._threads, _fsync_closing, fd)

    def _started(self, turn: Turn, pid: int) -> None:
        """The turn's command runs as `pid`. A DM turn's messages are acknowledged on
        the context consumer now, not when the turn ends: that consumer keeps group
        context only (nothing of a DM is read back from it after a crash: recovery
        acknowledges what it finds), and the end of a turn is where the
        conversation's next message is ingested and polled. The acknowledgement is
        gathered with other DM turns' into one call."""
        self.journal.running(turn.turn_id, pid)
        if turn.conversation_type == "dm" and not turn.context_acked:
            turn.context_acked = True
            self._dm_context.add(self.context.to_ack(turn))

    def _background(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """`work` as a task the bridge keeps until it ends (and stops with it)."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _ack_context(self, ids: list[str]) -> None:
        consumer = self.config.context_consumer
        try:
            await self._transient("ack context", lambda: ack(self.caller, ids, consumer))
        except ConeError as err:  # deterministic: stop the bridge with it
            log.error("acknowledging context refused (%s: %s); stopping", err.reason, err.message)
            self._fatal = err
            self._changed.set()

    def _release(self, cid: str) -> None:
        """This task's turn no longer holds the conversation: poll it again."""
        if self.running.get(cid) is asyncio.current_task():
            del self.running[cid]
        self._changed.set()

    async def _answer(self, turn: Turn, stdout: bytes, attempt: int) -> None:
        try:
            requests = replies(stdout, turn.conversation_id, turn.reply_key)
            folded = bool(requests) and len(turn.ack_ids) <= _REPLY_ACK_MAX
            if folded:  # the last reply acknowledges the turn (one call, one commit)
                requests[-1].ack_consumer = self.config.consumer
                requests[-1].ack_message_ids.extend(turn.ack_ids)
            for n, request in enumerate(requests):
                if n == 1 and os.environ.get(CRASH_HOOK_ENV) == "between-replies":
                    os._exit(70)
                result = await self._transient(
                    "reply", lambda r=request: self.caller.call("Reply", r, timeout=120)
                )
                log.info(
                    "turn %s replied %s%s",
                    turn.turn_id[:12],
                    result.message_id[:12],
                    " (deduplicated)" if result.deduplicated else "",
                )
        except ConeError as err:
            await self._park(turn, attempt, f"reply refused: {err.reason}: {err.message}")
            return
        if requests and os.environ.get(CRASH_HOOK_ENV) == "after-reply":
            os._exit(70)
        # A daemon of an earlier release ignores ackMessageIds (and answers 0): Ack then.
        acknowledged = folded and result.acknowledged == len(set(turn.ack_ids))
        await self._settle(turn, acknowledged=acknowledged)

    async def _settle(self, turn: Turn, acknowledged: bool = False) -> None:
        if not acknowledged:
            await self._transient(
                "ack", lambda: ack(self.caller, turn.ack_ids, self.config.consumer)
            )
        # Acknowledged: the turn is done with, and its conversation may be polled again
        # (its next turn can begin before the context consumer's ack below returns;
        # `consumed` updated the held context before it awaits). The journal's line is
        # not fsynced (`Journal.finish`).
        self.journal.finish(turn.conversation_id)
        self._release(turn.conversation_id)
        if turn.context_acked:  # a DM's, as its command started
            self.context.forget(turn)
            return
        await self._transient("ack context", lambda: self.context.consumed(turn))

    async def _park(self, turn: Turn, attempts: int, reason: str) -> None:
        record = Parked(
            parked_at=time.time(),
            consumer=self.config.consumer,
            turn_id=turn.turn_id,
            conversation_id=turn.conversation_id,
            conversation_type=turn.conversation_type,
            message_ids=turn.ack_ids,
            attempts=attempts,
            reason=reason,
        )
        self.journal.park(record)
        log.error(
            "parked turn %s in %s after %d attempts (%s); `cone bridge --parked` lists it",
            turn.turn_id, turn.conversation_id, attempts, reason,
        )  # fmt: skip
        await self._settle(turn)


__all__ = ["CRASH_HOOK_ENV", "Bridge", "BridgeConfig", "retry_delay"]
