"""The D14N API below libxmtp: originators and sequence ids over the one store,
vector-cursor queries and paging, stream hand-over, newest envelopes, refusals,
fault injection, and the store's climb to schema 2."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import pytest
from google.protobuf import empty_pb2

from cone.devnet import Devnet, store, topics
from conepb.xmtp import associations_pb2 as assoc
from conepb.xmtp import identity_api_pb2 as ident
from conepb.xmtp import mls_api_pb2 as mls
from conepb.xmtpmigration import migration_pb2_grpc as migration_grpc
from conepb.xmtpv4 import envelopes_pb2 as env
from conepb.xmtpv4 import message_api_pb2 as msg
from conepb.xmtpv4 import message_api_pb2_grpc as msg_grpc
from conepb.xmtpv4 import payer_api_pb2 as payer
from conepb.xmtpv4 import payer_api_pb2_grpc as payer_grpc
from support import mls as mls_bytes
from support import wire

WAIT_S = 10.0
PUBLISH = "/xmtp.xmtpv4.payer_api.PayerApi/PublishClientEnvelopes"


@dataclass
class D14n:
    """Stubs of the gateway and node APIs, and the V3 node, on one channel."""

    payer: payer_grpc.PayerApiStub
    node: msg_grpc.ReplicationApiStub
    v3: wire.Node


@asynccontextmanager
async def _client(url: str) -> AsyncIterator[D14n]:
    async with wire.node(url) as v3:
        yield D14n(payer_grpc.PayerApiStub(v3.channel), msg_grpc.ReplicationApiStub(v3.channel), v3)


@dataclass(frozen=True)
class Opened:
    """An envelope's three levels, decoded as libxmtp decodes them."""

    originator: int
    sequence_id: int
    originator_ns: int
    client: env.ClientEnvelope
    proof: str | None


def _open(envelope: env.OriginatorEnvelope) -> Opened:
    unsigned = env.UnsignedOriginatorEnvelope.FromString(envelope.unsigned_originator_envelope)
    payer_envelope = env.PayerEnvelope.FromString(unsigned.payer_envelope_bytes)
    client = env.ClientEnvelope.FromString(payer_envelope.unsigned_client_envelope)
    return Opened(
        unsigned.originator_node_id,
        unsigned.originator_sequence_id,
        unsigned.originator_ns,
        client,
        envelope.WhichOneof("proof"),
    )


def _group_envelope(
    group_id: bytes, data: bytes, depends_on: dict[int, int] | None = None
) -> env.ClientEnvelope:
    envelope = env.ClientEnvelope(group_message=wire.group_input(data))
    envelope.aad.target_topic = topics.topic(topics.KIND_GROUP_MESSAGES, group_id)
    if depends_on:
        envelope.aad.depends_on.node_id_to_sequence_id.update(depends_on)
    return envelope


async def _publish(c: D14n, *envelopes: env.ClientEnvelope) -> payer.PublishClientEnvelopesResponse:
    response: payer.PublishClientEnvelopesResponse = await c.payer.PublishClientEnvelopes(
        payer.PublishClientEnvelopesRequest(envelopes=list(envelopes))
    )
    return response


async def _query(
    c: D14n, topic: bytes, cursor: dict[int, int] | None = None, limit: int = 0
) -> list[Opened]:
    query = msg.EnvelopesQuery(topics=[topic])
    query.last_seen.node_id_to_sequence_id.update(cursor or {})
    response = await c.node.QueryEnvelopes(msg.QueryEnvelopesRequest(query=query, limit=limit))
    return [_open(e) for e in response.envelopes]


def _commit(group_id: bytes) -> bytes:
    return mls_bytes.private_message(group_id, content_type=3)


def _message(group_id: bytes) -> bytes:
    return mls_bytes.private_message(group_id)


async def test_v3_data_reads_under_the_migrators_originators_and_d14n_writes_under_the_node(
    devnet_node: Devnet,
) -> None:
    group = os.urandom(16)
    topic = topics.topic(topics.KIND_GROUP_MESSAGES, group)
    async with _client(devnet_node.url) as c:
        await wire.send(c.v3, group, content_type=3)  # a V3 commit: id 1
        await wire.send(c.v3, group)  # a V3 message: id 2
        published = await _publish(
            c,
            _group_envelope(group, _message(group), {0: 1}),
            _group_envelope(group, _commit(group)),
        )
        read = await _query(c, topic)
        v3_page = await wire.query(c.v3, group, direction=mls.SORT_DIRECTION_ASCENDING)

    assert [(e.originator, e.sequence_id) for e in read] == [(0, 1), (10, 2), (100, 3), (0, 4)]
    assert [_open(e) for e in published.originator_envelopes] == read[2:]
    # Chain-sequenced payloads carry a chain proof; the node's own writes none.
    assert [e.proof for e in read] == ["blockchain_proof", None, None, "blockchain_proof"]
    assert read[2].client.aad.depends_on.node_id_to_sequence_id == {0: 1}
    assert all(e.client.aad.target_topic == topic for e in read)
    timestamps = [e.originator_ns for e in read]
    assert timestamps == sorted(timestamps)
    # The V3 view holds the same four rows under the same ids, with the same bytes.
    assert [m.v1.id for m in v3_page.messages] == [1, 2, 3, 4]
    assert [m.v1.is_commit for m in v3_page.messages] == [True, False, False, True]
    assert [m.v1.data for m in v3_page.messages] == [e.client.group_message.v1.data for e in read]


async def test_queries_take_each_originators_cursor_and_page_in_storage_order_without_gaps(
    devnet_node: Devnet,
) -> None:
    group = os.urandom(16)
    topic = topics.topic(topics.KIND_GROUP_MESSAGES, group)
    async with _client(devnet_node.url) as c:
        for i in range(30):  # ids 1..30: every fifth a commit, the rest V3 or D14N messages
            if i % 5 == 0:
                await _publish(c, _group_envelope(group, _commit(group)))
            elif i % 2:
                await wire.send(c.v3, group)
            else:
                await _publish(c, _group_envelope(group, _message(group)))
        everything = await _query(c, topic)
        ids = [e.sequence_id for e in everything]
        assert ids == list(range(1, 31))
        origin = {e.sequence_id: e.originator for e in everything}
        assert {o for o in origin.values()} == {0, 10, 100}

        # Above each originator's own cursor; an absent originator counts as 0.
        above = await _query(c, topic, {0: 16, 10: 20})
        assert [e.sequence_id for e in above] == [
            i for i in ids
            if i > {0: 16, 10: 20, 100: 0}[origin[i]]
        ]  # fmt: skip

        # Pages of 7, each continued from the cursor the reader keeps: all, once, in order.
        seen: list[int] = []
        cursor: dict[int, int] = {}
        while page := await _query(c, topic, cursor, limit=7):
            assert len(page) <= 7
            for e in page:
                seen.append(e.sequence_id)
                cursor[e.originator] = max(cursor.get(e.originator, 0), e.sequence_id)
        assert seen == ids


async def test_a_query_over_several_topics_pages_them_together_in_storage_order(
    devnet_node: Devnet,
) -> None:
    async with _client(devnet_node.url) as c:
        first, second = await wire.new_inbox(c.v3), await wire.new_inbox(c.v3)
        for _address, inbox in (first, second, first, second):
            await wire.publish(c.v3, wire.update(inbox, wire.add_address(wire.address())))
        inbox_topics = [topics.identity_topic(first[1]), topics.identity_topic(second[1])]
        query = msg.EnvelopesQuery(topics=inbox_topics)
        query.last_seen.node_id_to_sequence_id[1] = 1
        response = await c.node.QueryEnvelopes(msg.QueryEnvelopesRequest(query=query, limit=3))
    # Six updates with sequence ids 1..6 alternating between the inboxes: above 1, the
    # first three of both together, not three of the first inbox's.
    assert [_open(e).sequence_id for e in response.envelopes] == [2, 3, 4]


async def test_a_stream_catches_up_then_goes_live_with_no_gap_and_no_duplicate(
    devnet_node: Devnet,
) -> None:
    group = os.urandom(16)
    topic = topics.topic(topics.KIND_GROUP_MESSAGES, group)
    async with _client(devnet_node.url) as c:
        for _ in range(40):
            await wire.send(c.v3, group)
        query = msg.EnvelopesQuery(topics=[topic])
        query.last_seen.SetInParent()  # present and empty: catch up from the start
        call = c.node.SubscribeEnvelopes(msg.SubscribeEnvelopesRequest(query=query))

        async def publish_more() -> None:
            for i in range(60):  # racing the catch-up, both APIs
                if i % 2:
                    await wire.send(c.v3, group)
                else:
                    await _publish(c, _group_envelope(group, _message(group)))

        writer = asyncio.create_task(publish_more())
        got: list[int] = []
        async with asyncio.timeout(WAIT_S):
            first = await call.read()
            assert first.envelopes == []  # the empty first response
            while len(got) < 100:
                response = await call.read()
                assert response is not grpc.aio.EOF
                got += [_open(e).sequence_id for e in response.envelopes]
        await writer
        call.cancel()
    assert got == list(range(1, 101))


async def test_a_stream_from_a_cursor_sends_only_what_is_above_it(devnet_node: Devnet) -> None:
    group = os.urandom(16)
    topic = topics.topic(topics.KIND_GROUP_MESSAGES, group)
    async with _client(devnet_node.url) as c:
        await wire.send(c.v3, group, content_type=3)  # 0:1
        await wire.send(c.v3, group, 2)  # 10:2, 10:3
        query = msg.EnvelopesQuery(topics=[topic])
        query.last_seen.node_id_to_sequence_id.update({0: 1, 10: 2})
        call = c.node.SubscribeEnvelopes(msg.SubscribeEnvelopesRequest(query=query))
        async with asyncio.timeout(WAIT_S):
            assert (await call.read()).envelopes == []
            caught_up = await call.read()
            await _publish(c, _group_envelope(group, _message(group)))
            live = await call.read()
        call.cancel()
    assert [(_open(e).originator, _open(e).sequence_id) for e in caught_up.envelopes] == [(10, 3)]
    assert [(_open(e).originator, _open(e).sequence_id) for e in live.envelopes] == [(100, 4)]


async def test_subscribe_topics_takes_a_cursor_per_topic_and_reports_its_catch_up(
    devnet_node: Devnet,
) -> None:
    one, two, installation = os.urandom(16), os.urandom(16), os.urandom(32)
    welcome = env.ClientEnvelope(
        welcome_message=mls.WelcomeMessageInput(
            v1=mls.WelcomeMessageInput.V1(
                installation_key=installation, data=b"w", hpke_public_key=b"k"
            )
        )
    )
    welcome.aad.target_topic = topics.topic(topics.KIND_WELCOME_MESSAGES, installation)
    filters = msg.SubscribeTopicsRequest.TopicFilter
    status = msg.SubscribeTopicsResponse
    async with _client(devnet_node.url) as c:
        await wire.send(c.v3, one, 3)  # group one: 10:1, 10:2, 10:3
        await wire.send(c.v3, two, 2)  # group two: 10:4, 10:5
        await _publish(c, welcome)  # welcome 100:1
        request = msg.SubscribeTopicsRequest(
            filters=[
                filters(topic=topics.topic(topics.KIND_GROUP_MESSAGES, one)),
                filters(topic=topics.topic(topics.KIND_GROUP_MESSAGES, two)),
                filters(topic=topics.topic(topics.KIND_WELCOME_MESSAGES, installation)),
            ]
        )
        request.filters[0].last_seen.node_id_to_sequence_id[10] = 2
        request.filters[1].last_seen.node_id_to_sequence_id[10] = 4
        call = c.node.SubscribeTopics(request)
        got: list[str | tuple[int, int]] = []
        async with asyncio.timeout(WAIT_S):
            while status.SUBSCRIPTION_STATUS_CATCHUP_COMPLETE not in got:
                response = await call.read()
                if response.HasField("status_update"):
                    got.append(response.status_update.status)
                else:
                    got += [
                        (_open(e).originator, _open(e).sequence_id)
                        for e in response.envelopes.envelopes
                    ]
            await _publish(c, _group_envelope(two, _message(two)))
            live = await call.read()
        call.cancel()
    assert got == [
        status.SUBSCRIPTION_STATUS_STARTED,
        (10, 3),
        (10, 5),
        (100, 1),
        status.SUBSCRIPTION_STATUS_CATCHUP_COMPLETE,
    ]
    assert [(_open(e).originator, _open(e).sequence_id) for e in live.envelopes.envelopes] == [
        (100, 6)
    ]


async def test_newest_envelope_answers_every_topic_in_order_and_empty_when_it_has_none(
    devnet_node: Devnet,
) -> None:
    group, installation = os.urandom(16), os.urandom(32)
    uploaded = mls_bytes.key_package(installation)
    async with _client(devnet_node.url) as c:
        await wire.send(c.v3, group, 3)
        address, inbox = await wire.new_inbox(c.v3)
        await c.v3.mls.UploadKeyPackage(
            mls.UploadKeyPackageRequest(
                key_package=mls.KeyPackageUpload(key_package_tls_serialized=uploaded)
            )
        )
        response = await c.node.GetNewestEnvelope(
            msg.GetNewestEnvelopeRequest(
                topics=[
                    topics.topic(topics.KIND_KEY_PACKAGES, installation),
                    topics.topic(topics.KIND_GROUP_MESSAGES, os.urandom(16)),
                    topics.topic(topics.KIND_GROUP_MESSAGES, group),
                    topics.identity_topic(inbox),
                ]
            )
        )
        inboxes = await c.node.GetInboxIds(
            msg.GetInboxIdsRequest(
                requests=[
                    msg.GetInboxIdsRequest.Request(identifier="0x" + address[2:].upper()),
                    msg.GetInboxIdsRequest.Request(identifier=wire.address()),
                ]
            )
        )
    key_package, absent, newest, identity = response.results
    assert not absent.HasField("originator_envelope")
    opened = _open(key_package.originator_envelope)
    assert opened.originator == topics.ORIGINATOR_V3_KEY_PACKAGES
    assert opened.client.upload_key_package.key_package.key_package_tls_serialized == uploaded
    assert (_open(newest.originator_envelope).sequence_id) == 3
    assert _open(identity.originator_envelope).originator == topics.ORIGINATOR_IDENTITY
    assert [r.inbox_id if r.HasField("inbox_id") else None for r in inboxes.responses] == [
        inbox,
        None,
    ]


async def test_identity_updates_and_welcomes_published_on_d14n_are_read_on_v3(
    devnet_node: Devnet,
) -> None:
    address = wire.address()
    inbox = wire.inbox_id(address)
    installation = os.urandom(32)
    update = wire.update(inbox, wire.create_inbox(address), wire.add_installation(installation))
    identity = env.ClientEnvelope(identity_update=update)
    identity.aad.target_topic = topics.identity_topic(inbox)
    welcome = env.ClientEnvelope(
        welcome_message=mls.WelcomeMessageInput(
            v1=mls.WelcomeMessageInput.V1(
                installation_key=installation, data=b"w", hpke_public_key=b"k"
            )
        )
    )
    welcome.aad.target_topic = topics.topic(topics.KIND_WELCOME_MESSAGES, installation)
    async with _client(devnet_node.url) as c:
        await _publish(c, identity, welcome)
        assert await wire.inbox_of(c.v3, address) == inbox
        updates = await c.v3.identity.GetIdentityUpdates(
            ident.GetIdentityUpdatesRequest(
                requests=[ident.GetIdentityUpdatesRequest.Request(inbox_id=inbox)]
            )
        )
        welcomes = await c.v3.mls.QueryWelcomeMessages(
            mls.QueryWelcomeMessagesRequest(installation_key=installation)
        )
        (read_identity,) = await _query(c, topics.identity_topic(inbox), {1: 0})
        (read_welcome,) = await _query(c, topics.topic(topics.KIND_WELCOME_MESSAGES, installation))
    (stored,) = updates.responses[0].updates
    assert stored.update == update
    assert (read_identity.originator, read_identity.sequence_id) == (1, stored.sequence_id)
    assert assoc.IdentityUpdate.FromString(read_identity.client.identity_update).inbox_id == inbox
    (v3_welcome,) = welcomes.messages
    assert (read_welcome.originator, read_welcome.sequence_id) == (100, v3_welcome.v1.id)


async def test_a_topic_that_does_not_match_its_payload_is_refused_and_stores_nothing(
    devnet_node: Devnet,
) -> None:
    group = os.urandom(16)
    good = _group_envelope(group, _message(group))
    wrong = _group_envelope(os.urandom(16), _message(group))
    report = env.ClientEnvelope(payer_report=b"r")
    async with _client(devnet_node.url) as c:
        for bad in (wrong, report, env.ClientEnvelope()):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await _publish(c, good, bad)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "envelopes[1]" in str(refused.value.details())
        assert await _query(c, topics.topic(topics.KIND_GROUP_MESSAGES, group)) == []
        nodes = await c.payer.GetNodes(payer.GetNodesRequest())
    assert dict(nodes.nodes) == {topics.NODE_ID: devnet_node.url}


async def test_faults_reach_the_d14n_side_and_the_v3_cutover_leaves_its_streams_open(
    devnet_node: Devnet,
) -> None:
    group = os.urandom(16)
    topic = topics.topic(topics.KIND_GROUP_MESSAGES, group)
    faults = devnet_node.faults
    async with _client(devnet_node.url) as c:
        faults.fail_next(PUBLISH, 1)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await _publish(c, _group_envelope(group, _message(group)))
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        faults.fail_group(group, 1, grpc.StatusCode.RESOURCE_EXHAUSTED)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await _publish(c, _group_envelope(group, _message(group)))
        assert failed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert await _query(c, topic) == []

        call = c.node.SubscribeEnvelopes(
            msg.SubscribeEnvelopesRequest(query=msg.EnvelopesQuery(topics=[topic]))
        )
        async with asyncio.timeout(WAIT_S):
            assert (await call.read()).envelopes == []
            assert faults.set_v3_cutover(True) == 0  # no V3 stream open; this one stays
            await _publish(c, _group_envelope(group, _message(group)))
            live = await call.read()
            assert [_open(e).sequence_id for e in live.envelopes] == [1]
            assert faults.drop_streams() == 1
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await call.read()
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_schema_1_store_climbs_to_2_and_its_rows_read_as_v3_data(tmp_path: Path) -> None:
    path = tmp_path / "devnet.db"
    with sqlite3.connect(path) as db:
        db.executescript(store._SCHEMA + "PRAGMA user_version = 1;")
        db.execute(
            "INSERT INTO group_messages (created_ns, group_id, data, sender_hmac, should_push,"
            " is_commit, dedup) VALUES (1, x'67', x'6d', x'', 0, 0, x'01')"
        )
    db2 = store.Store(str(path))
    try:
        (row,) = db2.group_envelopes(b"g", {}, 0, 10)
        assert (row.originator, row.id, row.data) == (topics.ORIGINATOR_V3_MESSAGES, 1, b"m")
    finally:
        db2.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (2,)


async def test_a_devnet_started_past_its_cutover_refuses_v3_publishes_and_serves_d14n() -> None:
    at = time.time_ns() - 1
    node = Devnet(port=0, cutover_ns=at)
    group = os.urandom(16)
    async with node as url, wire.node(url) as v3, _client(url) as c:
        cutover = migration_grpc.D14nMigrationApiStub(v3.channel)
        assert (await cutover.FetchD14nCutover(empty_pb2.Empty())).timestamp_ns == at
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await wire.send(v3, group)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        await _publish(c, _group_envelope(group, _message(group)))  # D14N publishes
        assert len((await wire.query(v3, group)).messages) == 1  # V3 reads it
        assert node.faults.set_cutover(None) == 0
        assert (await cutover.FetchD14nCutover(empty_pb2.Empty())).timestamp_ns == 2**63 - 1
        await wire.send(v3, group)  # V3 publishes again
