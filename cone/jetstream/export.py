"""The inbound export: cone's inbox, as one of its own consumers reads it, published to
JetStream exactly once.

The export is a consumer of the inbox like any other (receive, then ack): what
Receive hands out is what it exports (accepted conversations only; a request's
messages once accepted, in order; never a blocked inbox's), oldest first. Each
message is published with `Nats-Msg-Id` = its cone message id and acknowledged in cone
only after JetStream acknowledged it: the consumer's acknowledged point is the export
cursor. A crash between the two hands the batch out again at the next start;
JetStream drops the repeats by their id within the stream's duplicate window.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Final

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.errors import NoStreamResponseError

from cone import _failpoints
from cone.client import ConeClient
from cone.errors import ConeError
from cone.jetstream.state import EXPORTED, STATE
from cone.jetstream.subjects import Layout
from cone.schema import message_to_json
from conepb.v1 import cone_pb2 as pb

log = logging.getLogger(__name__)

#: Messages one receive takes (each published in order before the batch is acked).
BATCH: Final = 100
#: A receive's long poll.
WAIT_MS: Final = 10_000
#: Seconds JetStream may take to acknowledge one publish.
PUBLISH_TIMEOUT_S: Final = 5.0
#: Backoff after a failure, doubling to the bound.
RETRY_S: Final = (0.2, 5.0)
#: The failpoint between JetStream's ack of a batch and cone's ack of it.
EXPORTED_FAILPOINT: Final = "jetstream_exported"


def payload(message: pb.Message) -> bytes:
    """The exported form of a message: the JSON `receive` gives for it."""
    return json.dumps(message_to_json(message), separators=(",", ":")).encode()


class Exporter:
    """Reads consumer `consumer` of the inbox and publishes it on the layout's subjects."""

    def __init__(self, cone: ConeClient, js: JetStreamContext, layout: Layout, consumer: str):
        self._cone = cone
        self._js = js
        self._layout = layout
        self._consumer = consumer
        self._stream = layout.stream("in")

    async def run(self) -> None:
        """Export until cancelled."""
        delay = RETRY_S[0]
        while True:
            try:
                batch = await self._cone.receive(self._consumer, limit=BATCH, wait_ms=WAIT_MS)
            except ConeError as exc:
                if not exc.retryable:
                    raise
                # Nothing pending and the XMTP network down, or the daemon busy: later.
                log.debug("jetstream export: receive: %s", exc.message)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_S[1])
                continue
            delay = RETRY_S[0]
            if batch.messages:
                await self._export(list(batch.messages))

    async def _export(self, messages: list[pb.Message]) -> None:
        for message in messages:
            await self._publish(message)
        await _failpoints.reached(EXPORTED_FAILPOINT)
        await self._cone.ack([m.message_id for m in messages], self._consumer)
        EXPORTED.inc(len(messages))

    async def _publish(self, message: pb.Message) -> None:
        """Publish one message, retrying until JetStream acknowledges it: in order,
        since the next one waits (a retry of a stored one is dropped as a duplicate)."""
        subject = self._layout.inbound(message.conversation_id)
        data = payload(message)
        delay = RETRY_S[0]
        while True:
            try:
                ack = await self._js.publish(
                    subject,
                    data,
                    timeout=PUBLISH_TIMEOUT_S,
                    stream=self._stream,
                    headers={"Nats-Msg-Id": message.message_id},
                )
            except NoStreamResponseError:
                # The stream is gone (removed, or its cluster without a leader): start
                # over, which lays it out again.
                raise
            except (NatsError, TimeoutError) as exc:
                STATE.error = f"export: {type(exc).__name__}"
                log.info(
                    "jetstream export of %s: %s; retrying", message.message_id, type(exc).__name__
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_S[1])
                continue
            STATE.error = None
            if ack.duplicate:
                log.info("jetstream export: %s was already in the stream", message.message_id)
            return


__all__ = ["EXPORTED_FAILPOINT", "Exporter", "payload"]
