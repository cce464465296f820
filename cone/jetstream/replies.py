"""The outbound side: workers' sends and replies, taken from JetStream and sent once.

A worker publishes the params of `send` or `reply` (the JSON-RPC method's, key
included) on `P.I.out.send` or `P.I.out.reply` with `Nats-Msg-Id` = the send key.
The daemon's durable consumer takes each, calls the operation through cone's own
entry (the same request, rules and key protocol as JSON-RPC), publishes the outcome on
`P.I.outcome.<sha256(key)>`, and only then acks. A crash anywhere before the ack
redelivers it; cone's send key makes the repeat harmless (the same message id comes
back, `deduplicated`). A refusal (bad params, a conversation not accepted, blocked or
unknown, a key used for another destination or content type) is final: its reason
goes on the outcome subject and nothing is sent. A retryable failure (the XMTP network
down) is redelivered later.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, Final

from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext

from cone import _failpoints
from cone.client import ConeClient
from cone.errors import ConeError
from cone.jetstream.state import REPLIES, STATE
from cone.jetstream.subjects import OUT_CONSUMER, Layout
from cone.schema import message_to_json, methods

log = logging.getLogger(__name__)

METHODS: Final = ("send", "reply")
#: Messages one fetch takes at most.
FETCH: Final = 16
#: Workers' messages handled at once (one at a time per conversation).
AT_ONCE: Final = 32
#: A fetch's long poll, seconds.
FETCH_WAIT_S: Final = 5.0
#: While a send runs, JetStream is told it is in progress this often (its ack wait is 10 s).
PROGRESS_S: Final = 3.0
#: A retryable failure is redelivered after this many seconds, doubling to the bound.
RETRY_DELAY_S: Final = 2.0
RETRY_MAX_S: Final = 60.0
PUBLISH_TIMEOUT_S: Final = 5.0
#: The failpoint between a send's answer and the outcome's publication (and the ack).
SENT_FAILPOINT: Final = "jetstream_sent"


class Refused(Exception):
    """A worker's message refused before it reaches cone."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _request(msg: Msg) -> tuple[str, str, Any]:
    """(method, key, request) of a worker's message, or Refused/InvalidArgument."""
    method = msg.subject.rsplit(".", 1)[-1]
    if method not in METHODS:
        raise Refused("unknown_method", f"publish on .out.send or .out.reply, not {msg.subject}")
    key = (msg.headers or {}).get("Nats-Msg-Id", "")
    if not key:
        raise Refused("missing_key", "set the Nats-Msg-Id header to the send key")
    try:
        params = json.loads(msg.data)
    except (ValueError, RecursionError):
        raise Refused("invalid_json", "the body is not JSON: give the params object") from None
    if not isinstance(params, dict):
        raise Refused("invalid_json", "the body must be a JSON object of params")
    if params.setdefault("key", key) != key:
        raise Refused("key_mismatch", "params.key differs from the Nats-Msg-Id header")
    return method, key, methods()[method].to_request(params)


class Replier:
    """Takes workers' messages from the outbound stream and answers each once."""

    def __init__(self, cone: ConeClient, js: JetStreamContext, layout: Layout) -> None:
        self._cone = cone
        self._js = js
        self._layout = layout
        self._lanes = _Lanes()
        self._in_flight = 0
        self._room = asyncio.Condition()

    async def run(self) -> None:
        """Handle workers' messages until cancelled: up to `AT_ONCE` at a time, one at
        a time and in the stream's order within a conversation (its lane)."""
        sub = await self._js.pull_subscribe_bind(OUT_CONSUMER, stream=self._layout.stream("out"))
        async with asyncio.TaskGroup() as group:
            while True:
                async with self._room:
                    await self._room.wait_for(lambda: self._in_flight < AT_ONCE)
                    room = AT_ONCE - self._in_flight
                try:
                    batch = await sub.fetch(min(FETCH, room), timeout=FETCH_WAIT_S)
                except NatsTimeout:
                    continue
                except NatsError as exc:
                    log.info("jetstream replies: fetch: %s", type(exc).__name__)
                    await asyncio.sleep(RETRY_DELAY_S)
                    continue
                for msg in batch:
                    self._in_flight += 1
                    group.create_task(self._in_lane(msg, self._lanes.enter(_lane(msg))))

    async def _in_lane(self, msg: Msg, lane: tuple[str, asyncio.Lock]) -> None:
        try:
            # Renewed while it waits for its lane and while it is sent.
            async with _in_progress(msg), lane[1]:  # FIFO locks: the stream's order holds
                await self._handle(msg)
        except (NatsError, TimeoutError) as exc:
            # Not acked: JetStream redelivers it after the ack wait.
            log.info("jetstream replies: %s; redelivered later", type(exc).__name__)
        finally:
            self._lanes.leave(lane[0])
            async with self._room:
                self._in_flight -= 1
                self._room.notify()

    async def _handle(self, msg: Msg) -> None:
        key = (msg.headers or {}).get("Nats-Msg-Id") or f"seq:{msg.metadata.sequence.stream}"
        try:
            method, key, request = _request(msg)
            spec = methods()[method]
            response = await self._cone.call(spec.rpc, request, spec.timeout(request))
            outcome: dict[str, Any] = {"key": key, "ok": True, **message_to_json(response)}
            REPLIES.labels("deduplicated" if outcome.get("deduplicated") else "sent").inc()
        except Refused as exc:
            outcome = _refusal(key, exc.reason, exc.message)
        except ConeError as exc:
            if exc.retryable:
                log.info("jetstream replies: %s: %s; redelivered later", key, exc.reason)
                # Later each time (the network may be down for long), at most a minute.
                tries = msg.metadata.num_delivered or 1
                await msg.nak(delay=min(RETRY_DELAY_S * 2 ** (tries - 1), RETRY_MAX_S))
                return
            outcome = _refusal(key, exc.reason, exc.message, field=exc.field)
        if not outcome["ok"]:
            REPLIES.labels("refused").inc()
            log.info("jetstream replies: refused (%s)", outcome["error"]["reason"])
        await _failpoints.reached(SENT_FAILPOINT)
        await self._publish_outcome(key, outcome)
        await msg.ack_sync(timeout=PUBLISH_TIMEOUT_S)

    async def _publish_outcome(self, key: str, outcome: dict[str, Any]) -> None:
        data = json.dumps(outcome, separators=(",", ":")).encode()
        delay = 0.2
        while True:
            try:
                await self._js.publish(
                    self._layout.outcome(key),
                    data,
                    timeout=PUBLISH_TIMEOUT_S,
                    stream=self._layout.stream("outcome"),
                    headers={"Nats-Msg-Id": key},
                )
                STATE.error = None
                return
            except (NatsError, TimeoutError) as exc:
                STATE.error = f"outcome: {type(exc).__name__}"
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


class _Lanes:
    """One lock per conversation with messages in hand, dropped with its last one."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[asyncio.Lock, int]] = {}

    def enter(self, name: str) -> tuple[str, asyncio.Lock]:
        lock, n = self._held.get(name, (asyncio.Lock(), 0))
        self._held[name] = (lock, n + 1)
        return name, lock

    def leave(self, name: str) -> None:
        lock, n = self._held[name]
        if n == 1:
            del self._held[name]
        else:
            self._held[name] = (lock, n - 1)


def _lane(msg: Msg) -> str:
    """What orders a worker's message: its conversation (or destination)."""
    try:
        params = json.loads(msg.data)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(params, dict):
        return ""
    return str(params.get("conversationId") or params.get("to") or "")


def _refusal(key: str, reason: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"reason": reason, "message": message}
    if field is not None:
        error["field"] = field
    return {"key": key, "ok": False, "error": error}


@contextlib.asynccontextmanager
async def _in_progress(msg: Msg) -> Any:
    """Tell JetStream the message is in hand, so that it is not handed out again."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(PROGRESS_S)
            with contextlib.suppress(NatsError):
                await msg.in_progress()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


__all__ = ["SENT_FAILPOINT", "Replier"]
