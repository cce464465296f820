"""The two server streams: SubscribeGroupMessages and SubscribeWelcomeMessages.

Order of a stream's life, each step needed by libxmtp:
1. headers go out at once (tonic's client waits for them before returning);
2. the live subscription is registered, then history above each filter's cursor is
   sent, so nothing stored in between is missed;
3. live rows follow; a per-topic high-water mark drops anything already sent, so
   each topic's ids strictly increase with no gap and no repeat;
4. the stream never ends on its own: only node shutdown or an injected drop ends it
   (UNAVAILABLE), or a subscriber too slow to keep its buffer bounded (ABORTED).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import grpc
from google.protobuf.message import Message

from cone.devnet import wire
from cone.devnet.hub import EndReason, Hub, Row, StreamEnded
from cone.devnet.paging import MAX_PAGE_SIZE, Page
from cone.devnet.stats import Stats
from cone.devnet.store import GroupMessageRow, Store, WelcomeRow
from cone.errors import InvalidArgument
from conepb.xmtp import mls_api_pb2 as mls

R = TypeVar("R", bound=Row)

#: The status each end of a subscription is reported with.
END_CODES: Final = {
    EndReason.DROPPED: grpc.StatusCode.UNAVAILABLE,
    EndReason.SHUTDOWN: grpc.StatusCode.UNAVAILABLE,
    EndReason.TOO_SLOW: grpc.StatusCode.ABORTED,
    EndReason.V3_CUTOVER: grpc.StatusCode.UNAVAILABLE,
}

#: Sent with the headers, as the reference node does.
INITIAL_METADATA: Final = (("subscribed", "true"),)


class StreamServer:
    """Serves subscriptions from the store and the live hubs."""

    def __init__(
        self,
        store: Store,
        groups: Hub[GroupMessageRow],
        welcomes: Hub[WelcomeRow],
        stats: Stats,
    ) -> None:
        self._store = store
        self._groups = groups
        self._welcomes = welcomes
        self._stats = stats

    async def serve_group_messages(
        self, request: mls.SubscribeGroupMessagesRequest, context: Any
    ) -> None:
        """Serve one SubscribeGroupMessages call; an empty filter list idles."""
        cursors = _cursors([(f.group_id, f.id_cursor) for f in request.filters], "group_id")
        await self._serve(
            self._groups,
            cursors,
            self._store.newest_group_message_ids,
            self._store.group_messages,
            wire.group_message,
            context,
        )

    async def serve_welcomes(
        self, request: mls.SubscribeWelcomeMessagesRequest, context: Any
    ) -> None:
        """Serve one SubscribeWelcomeMessages call; at least one filter is required."""
        if not request.filters:
            raise InvalidArgument("no filters: name at least one installation key", field="filters")
        pairs = [(f.installation_key, f.id_cursor) for f in request.filters]
        await self._serve(
            self._welcomes,
            _cursors(pairs, "installation_key"),
            self._store.newest_welcome_ids,
            self._store.welcomes,
            wire.welcome_message,
            context,
        )

    async def _serve(
        self,
        hub: Hub[R],
        cursors: Mapping[bytes, int],
        newest: Callable[[bytes], Mapping[int, int]],
        history: Callable[[bytes, Page], list[R]],
        to_wire: Callable[[R], Message],
        context: Any,
    ) -> None:
        sub = hub.subscribe(cursors)
        try:
            await context.send_initial_metadata(INITIAL_METADATA)
            sent = dict(cursors)  # per-topic high-water mark
            for topic in cursors:
                if max(newest(topic).values(), default=0) <= sent[topic]:
                    continue  # nothing above its cursor: no query
                while True:
                    rows = history(
                        topic, Page(ascending=True, limit=MAX_PAGE_SIZE, cursor=sent[topic])
                    )
                    for row in rows:
                        sub.check()
                        await self._deliver(context, to_wire, row)
                        sent[topic] = row.id
                    if len(rows) < MAX_PAGE_SIZE:
                        break
            while True:
                row = await sub.next()
                if row.id <= sent[row.topic]:
                    continue  # already sent from history
                await self._deliver(context, to_wire, row)
                sent[row.topic] = row.id
        except StreamEnded as ended:
            # abort() sends the status before it raises: forget the subscription first,
            # so that a client seeing the end never finds it still counted.
            hub.unsubscribe(sub)
            await context.abort(END_CODES[ended.reason], ended.reason.value)
        finally:
            hub.unsubscribe(sub)

    async def _deliver(self, context: Any, to_wire: Callable[[R], Message], row: R) -> None:
        start = time.perf_counter_ns()
        await context.write(to_wire(row))
        self._stats.record_delivery(time.perf_counter_ns() - start)


def _cursors(pairs: list[tuple[bytes, int]], field: str) -> dict[bytes, int]:
    """Each filter's topic and id cursor; a topic named twice starts from its lower
    cursor. At 10,000 filters (a client's every conversation) this is most of a
    subscription's cost: one pass, and a second only when a topic repeats."""
    cursors = dict(pairs)
    if len(cursors) < len(pairs):
        for topic, cursor in pairs:
            cursors[topic] = min(cursor, cursors[topic])
    if b"" in cursors:
        i = next(i for i, (topic, _) in enumerate(pairs) if not topic)
        raise InvalidArgument(f"filters[{i}].{field} is empty", field="filters")
    return cursors
