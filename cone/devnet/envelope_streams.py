"""SubscribeEnvelopes: D14N streams over the same live hubs as the V3 streams.

Order of a stream's life, as xmtpd serves it and libxmtp needs it:
1. an empty response goes out at once (headers; tonic waits for them);
2. the live subscription is registered, then every envelope of the topics above
   the request's cursor is sent (catch-up, pages of 1000), so nothing stored in
   between is missed;
3. live envelopes follow; a per-topic high-water mark (row ids, which grow with
   every originator's sequence) drops what catch-up already sent, so there is no
   gap and no duplicate;
4. an empty response every KEEPALIVE_S keeps an idle stream alive; the stream ends
   only at node shutdown or an injected drop (UNAVAILABLE), or when the client
   reads too slowly (ABORTED). The V3 cutover does not end it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

from cone.devnet import envelopes, topics
from cone.devnet.envelope_reads import read_topic
from cone.devnet.hub import Hub, StreamEnded
from cone.devnet.stats import Stats
from cone.devnet.store import GroupMessageRow, Store, WelcomeRow
from cone.devnet.streams import END_CODES
from cone.errors import InvalidArgument
from conepb.xmtpv4 import envelopes_pb2 as env
from conepb.xmtpv4 import message_api_pb2 as api

#: Seconds between empty responses on an idle stream.
KEEPALIVE_S: Final = 30.0
#: Envelopes per catch-up response, as xmtpd pages them.
CATCH_UP_PAGE: Final = 1000

_STREAMED: Final = (topics.KIND_GROUP_MESSAGES, topics.KIND_WELCOME_MESSAGES)


class EnvelopeStreams:
    """Serves SubscribeEnvelopes from the store and the live hubs."""

    def __init__(
        self, store: Store, groups: Hub[GroupMessageRow], welcomes: Hub[WelcomeRow], stats: Stats
    ) -> None:
        self._store = store
        self._groups = groups
        self._welcomes = welcomes
        self._stats = stats

    async def serve(self, request: api.SubscribeEnvelopesRequest, context: Any) -> None:
        """Serve one SubscribeEnvelopes call."""
        query = request.query
        if query.originator_node_ids:
            raise InvalidArgument(
                "query.originator_node_ids: streams by originator are node-to-node; name topics",
                field="query.originator_node_ids",
            )
        if not query.topics:
            raise InvalidArgument("query.topics is empty: name at least one topic", field="query")
        split = [topics.split(t, f"query.topics[{i}]") for i, t in enumerate(query.topics)]
        kinds = {kind for kind, _ in split}
        if not kinds <= set(_STREAMED) or len(kinds) > 1:
            names = ", ".join(sorted(topics.kind_name(k) for k in kinds))
            raise InvalidArgument(
                f"query.topics are of {names}: a stream carries topics of one kind, "
                "group messages (0) or welcome messages (1)",
                field="query.topics",
            )
        (kind,) = kinds
        cursor = topics.cursor_of(query.last_seen.node_id_to_sequence_id, "query.last_seen")
        identifiers = list(dict.fromkeys(identifier for _, identifier in split))
        if kind == topics.KIND_GROUP_MESSAGES:
            await self._serve(self._groups, kind, identifiers, cursor, envelopes.group_message,
                              context)  # fmt: skip
        else:
            await self._serve(self._welcomes, kind, identifiers, cursor, envelopes.welcome, context)

    async def _serve(
        self,
        hub: Hub[Any],
        kind: int,
        identifiers: list[bytes],
        cursor: dict[int, int],
        to_envelope: Callable[[Any], env.OriginatorEnvelope],
        context: Any,
    ) -> None:
        sub = hub.subscribe(identifiers, d14n=True)
        try:
            await context.write(api.SubscribeEnvelopesResponse())
            sent = dict.fromkeys(identifiers, 0)  # per-topic high-water mark (row id)
            for identifier in identifiers:
                while True:
                    page = read_topic(
                        self._store, kind, identifier, cursor, sent[identifier], CATCH_UP_PAGE
                    )
                    if page:
                        sub.check()
                        await self._deliver(context, [r.envelope for r in page])
                        sent[identifier] = page[-1].id
                    if len(page) < CATCH_UP_PAGE:
                        break
            while True:
                try:
                    row = await asyncio.wait_for(sub.next(), KEEPALIVE_S)
                except TimeoutError:
                    await context.write(api.SubscribeEnvelopesResponse())
                    continue
                if row.id <= sent[row.topic] or row.id <= cursor.get(row.originator, 0):
                    continue  # sent in catch-up, or below the client's cursor
                await self._deliver(context, [to_envelope(row)])
                sent[row.topic] = row.id
        except StreamEnded as ended:
            hub.unsubscribe(sub)  # before the status goes out, as the V3 streams do
            await context.abort(END_CODES[ended.reason], ended.reason.value)
        finally:
            hub.unsubscribe(sub)

    async def _deliver(self, context: Any, batch: list[env.OriginatorEnvelope]) -> None:
        start = time.perf_counter_ns()
        await context.write(api.SubscribeEnvelopesResponse(envelopes=batch))
        self._stats.record_delivery(time.perf_counter_ns() - start)
