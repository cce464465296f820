"""`xmtp.xmtpv4.message_api.ReplicationApi`: the D14N node's reads over the one store.

Queries name topics (cone/devnet/topics.py) and a cursor per originator; answers
come from the same rows the V3 API serves (cone/devnet/envelope_reads.py). Streams
are served by envelope_streams.py.
"""

from __future__ import annotations

from typing import Any, Final

from cone.devnet import topics
from cone.devnet.envelope_reads import newest, read_topic
from cone.devnet.envelope_streams import EnvelopeStreams
from cone.devnet.identity_service import answer_inbox_ids
from cone.devnet.store import Store
from cone.errors import InvalidArgument
from conepb.xmtpv4 import message_api_pb2 as api
from conepb.xmtpv4 import message_api_pb2_grpc as api_grpc

#: xmtpd's page cap: a limit of 0 or above it means it.
MAX_QUERY_LIMIT: Final = 1000
#: xmtpd's cap on topics in one request.
MAX_TOPICS: Final = 10_000


class ReplicationService(api_grpc.ReplicationApiServicer):
    """The node's reads over one store."""

    def __init__(self, store: Store, streams: EnvelopeStreams) -> None:
        self._store = store
        self._streams = streams

    async def QueryEnvelopes(
        self, request: api.QueryEnvelopesRequest, context: Any
    ) -> api.QueryEnvelopesResponse:
        query = request.query
        if query.originator_node_ids:
            raise InvalidArgument(
                "query.originator_node_ids: queries by originator are node-to-node; name topics",
                field="query.originator_node_ids",
            )
        split = _topics(query.topics, "query.topics")
        cursor = topics.cursor_of(query.last_seen.node_id_to_sequence_id, "query.last_seen")
        limit = request.limit if 0 < request.limit <= MAX_QUERY_LIMIT else MAX_QUERY_LIMIT
        # Across topics too, storage order: each kind's ids are one sequence, so a
        # page cut at `limit` leaves every topic's rest above the reader's cursor.
        reads = sorted(
            ((kind, read.id, i), read.envelope)
            for i, (kind, identifier) in enumerate(dict.fromkeys(split))
            for read in read_topic(self._store, kind, identifier, cursor, 0, limit)
        )
        return api.QueryEnvelopesResponse(envelopes=[envelope for _, envelope in reads[:limit]])

    async def GetNewestEnvelope(
        self, request: api.GetNewestEnvelopeRequest, context: Any
    ) -> api.GetNewestEnvelopeResponse:
        response = api.GetNewestEnvelopeResponse()
        for kind, identifier in _topics(request.topics, "topics"):
            entry = response.results.add()
            envelope = newest(self._store, kind, identifier)
            if envelope is not None:
                entry.originator_envelope.CopyFrom(envelope)
        return response

    async def GetInboxIds(
        self, request: api.GetInboxIdsRequest, context: Any
    ) -> api.GetInboxIdsResponse:
        response = api.GetInboxIdsResponse()
        answer_inbox_ids(self._store, request.requests, response.responses)
        return response

    async def SubscribeEnvelopes(
        self, request: api.SubscribeEnvelopesRequest, context: Any
    ) -> None:
        await self._streams.serve_envelopes(request, context)

    async def SubscribeTopics(self, request: api.SubscribeTopicsRequest, context: Any) -> None:
        await self._streams.serve_topics(request, context)


def _topics(raw: Any, field: str) -> list[tuple[int, bytes]]:
    if len(raw) > MAX_TOPICS:
        raise InvalidArgument(
            f"{field} has {len(raw)} topics, above the limit of {MAX_TOPICS}", field=field
        )
    return [topics.split(t, f"{field}[{i}]") for i, t in enumerate(raw)]
