"""SubscribeEnvelopes and SubscribeTopics: D14N streams over the V3 streams' live hubs.

Order of a stream's life, as xmtpd serves it and libxmtp needs it:
1. something goes out at once (headers; tonic waits for them): an empty response,
   or SubscribeTopics' STARTED;
2. the live subscription is registered, then every envelope of each topic above
   that topic's cursor is sent (catch-up, pages of 1000), so nothing stored in
   between is missed; SubscribeTopics then says CATCHUP_COMPLETE;
3. live envelopes follow; a per-topic high-water mark (row ids, which grow with
   every originator's sequence) drops what catch-up already sent, so there is no
   gap and no duplicate;
4. a keepalive every KEEPALIVE_S while idle (an empty response, or WAITING); the
   stream ends only at node shutdown or an injected drop (UNAVAILABLE), or when the
   client reads too slowly (ABORTED). The V3 cutover does not end it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from cone.devnet import envelopes, topics
from cone.devnet.envelope_reads import has_above, read_topic
from cone.devnet.hub import Hub, StreamEnded, Subscription
from cone.devnet.stats import Stats
from cone.devnet.store import GroupMessageRow, Store, WelcomeRow
from cone.devnet.streams import END_CODES
from cone.errors import InvalidArgument
from conepb.xmtpv4 import envelopes_pb2 as env
from conepb.xmtpv4 import message_api_pb2 as api

#: Seconds between keepalives on an idle stream.
KEEPALIVE_S: Final = 30.0
#: Envelopes per catch-up response, as xmtpd pages them.
CATCH_UP_PAGE: Final = 1000

_Topics = api.SubscribeTopicsResponse
_STATUS_STARTED: Final = _Topics.SUBSCRIPTION_STATUS_STARTED
_STATUS_CAUGHT_UP: Final = _Topics.SUBSCRIPTION_STATUS_CATCHUP_COMPLETE
_STATUS_WAITING: Final = _Topics.SUBSCRIPTION_STATUS_WAITING

#: A streamed topic: (kind, identifier).
_Key = tuple[int, bytes]


class EnvelopeStreams:
    """Serves D14N streams from the store and the live hubs."""

    def __init__(
        self, store: Store, groups: Hub[GroupMessageRow], welcomes: Hub[WelcomeRow], stats: Stats
    ) -> None:
        self._store = store
        self._groups = groups
        self._welcomes = welcomes
        self._stats = stats

    async def serve_envelopes(self, request: api.SubscribeEnvelopesRequest, context: Any) -> None:
        """Serve one SubscribeEnvelopes call: one cursor for every topic."""
        query = request.query
        if query.originator_node_ids:
            raise InvalidArgument(
                "query.originator_node_ids: streams by originator are node-to-node; name topics",
                field="query.originator_node_ids",
            )
        if not query.topics:
            raise InvalidArgument("query.topics is empty: name at least one topic", field="query")
        cursor = topics.cursor_of(query.last_seen.node_id_to_sequence_id, "query.last_seen")
        keys = [_key(t, f"query.topics[{i}]") for i, t in enumerate(query.topics)]
        cursors = dict.fromkeys(keys, cursor)

        async def send(batch: list[env.OriginatorEnvelope]) -> None:
            await context.write(api.SubscribeEnvelopesResponse(envelopes=batch))

        async def keepalive() -> None:
            await context.write(api.SubscribeEnvelopesResponse())

        await keepalive()
        await self._serve(cursors, send, keepalive, None, context)

    async def serve_topics(self, request: api.SubscribeTopicsRequest, context: Any) -> None:
        """Serve one SubscribeTopics call: a cursor per topic, and status updates."""

        async def status(value: int) -> None:
            await context.write(_Topics(status_update=_Topics.StatusUpdate(status=value)))

        await status(_STATUS_STARTED)
        if not request.filters:
            raise InvalidArgument("filters is empty: name at least one topic", field="filters")
        cursors: dict[_Key, dict[int, int]] = {}
        for i, f in enumerate(request.filters):
            key = _key(f.topic, f"filters[{i}].topic")
            cursor = topics.cursor_of(f.last_seen.node_id_to_sequence_id, f"filters[{i}]")
            if key in cursors:  # named twice: start from the lower cursor of each originator
                known = cursors[key]
                cursor = {o: min(cursor.get(o, 0), known.get(o, 0)) for o in {*cursor, *known}}
            cursors[key] = cursor

        async def send(batch: list[env.OriginatorEnvelope]) -> None:
            await context.write(_Topics(envelopes=_Topics.Envelopes(envelopes=batch)))

        async def caught_up() -> None:
            await status(_STATUS_CAUGHT_UP)

        await self._serve(cursors, send, lambda: status(_STATUS_WAITING), caught_up, context)

    async def _serve(
        self,
        cursors: Mapping[_Key, Mapping[int, int]],
        send: Callable[[list[env.OriginatorEnvelope]], Awaitable[None]],
        keepalive: Callable[[], Awaitable[None]],
        caught_up: Callable[[], Awaitable[None]] | None,
        context: Any,
    ) -> None:
        sub = self._subscribe(list(cursors))
        try:
            sent = dict.fromkeys(cursors, 0)  # per-topic high-water mark (row id)
            for key, cursor in cursors.items():
                kind, identifier = key
                if not has_above(self._store, kind, identifier, cursor):
                    continue  # no query for a topic with nothing above its cursor
                while True:
                    page = read_topic(self._store, kind, identifier, cursor, sent[key],
                                      CATCH_UP_PAGE)  # fmt: skip
                    if page:
                        sub.check()
                        await self._deliver(send, [r.envelope for r in page])
                        sent[key] = page[-1].id
                    if len(page) < CATCH_UP_PAGE:
                        break
            if caught_up is not None:
                await caught_up()
            while True:
                try:
                    async with asyncio.timeout(KEEPALIVE_S):
                        row = await sub.next()
                except TimeoutError:
                    await keepalive()
                    continue
                key = (_kind_of(row), row.topic)
                if key not in sent or row.id <= sent[key]:
                    continue  # another kind's topic, or sent in catch-up
                if row.id <= cursors[key].get(row.originator, 0):
                    continue  # below the client's cursor
                await self._deliver(send, [_envelope(row)])
                sent[key] = row.id
        except StreamEnded as ended:
            self._unsubscribe(sub)  # before the status goes out, as the V3 streams do
            await context.abort(END_CODES[ended.reason], ended.reason.value)
        finally:
            self._unsubscribe(sub)

    def _subscribe(self, keys: Sequence[_Key]) -> Subscription[Any]:
        groups = [i for k, i in keys if k == topics.KIND_GROUP_MESSAGES]
        welcomes = [i for k, i in keys if k == topics.KIND_WELCOME_MESSAGES]
        sub: Subscription[Any] = self._groups.subscribe(groups, d14n=True)
        if welcomes:
            self._welcomes.attach(sub, welcomes)
        return sub

    def _unsubscribe(self, sub: Subscription[Any]) -> None:
        self._groups.unsubscribe(sub)
        self._welcomes.unsubscribe(sub)

    async def _deliver(
        self,
        send: Callable[[list[env.OriginatorEnvelope]], Awaitable[None]],
        batch: list[env.OriginatorEnvelope],
    ) -> None:
        start = time.perf_counter_ns()
        await send(batch)
        self._stats.record_delivery(time.perf_counter_ns() - start)


def _kind_of(row: GroupMessageRow | WelcomeRow) -> int:
    if isinstance(row, GroupMessageRow):
        return topics.KIND_GROUP_MESSAGES
    return topics.KIND_WELCOME_MESSAGES


def _envelope(row: GroupMessageRow | WelcomeRow) -> env.OriginatorEnvelope:
    if isinstance(row, GroupMessageRow):
        return envelopes.group_message(row)
    return envelopes.welcome(row)


def _key(raw: bytes, field: str) -> _Key:
    kind, identifier = topics.split(raw, field)
    if kind not in (topics.KIND_GROUP_MESSAGES, topics.KIND_WELCOME_MESSAGES):
        raise InvalidArgument(
            f"{field} is a topic of {topics.kind_name(kind)}: only group messages (0) and "
            "welcome messages (1) are streamed",
            field=field,
        )
    return kind, identifier
