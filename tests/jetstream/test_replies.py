"""Workers' replies through JetStream: each sent once through cone's own send, its
outcome published; hostile ones refused with their reason, nothing sent."""

from __future__ import annotations

import json
from pathlib import Path

from nats.aio.client import Client

from cone.jetstream.replies import SENT_FAILPOINT
from cone.jetstream.subjects import Layout
from conepb.v1 import cone_pb2 as pb
from support.nats import NatsServer
from support.peers import Peer
from support.waiting import until

from ._worker import outcome
from .conftest import Bridged, bridged_daemon, jetstream_env


async def _publish(nc: Client, layout: Layout, method: str, params: dict[str, object]) -> None:
    key = str(params["key"])
    ack = await nc.jetstream().publish(
        layout.out(method), json.dumps(params).encode(), headers={"Nats-Msg-Id": key}
    )
    assert not ack.duplicate


async def _peer_texts(b: Bridged, text: str, count: int) -> list[str]:
    async def seen() -> list[str] | None:
        texts = await b.peer.texts(bytes.fromhex(b.conversation_id))
        return texts if texts.count(text) >= count else None

    return await until(seen)


async def test_a_reply_is_sent_once_and_its_outcome_published(bridged: Bridged, nc: Client) -> None:
    layout = Layout("cone", bridged.inbox_id, 4)
    params = {"conversationId": bridged.conversation_id, "text": "hello from a worker"}
    await _publish(nc, layout, "reply", {**params, "key": "reply:w1"})
    result = await outcome(nc, layout, "reply:w1")
    assert result["ok"] is True
    assert result["conversationId"] == bridged.conversation_id
    assert result["messageId"]
    texts = await _peer_texts(bridged, "hello from a worker", 1)
    assert texts.count("hello from a worker") == 1
    # A send by destination works the same way.
    await _publish(nc, layout, "send", {"to": bridged.peer.address, "text": "hi", "key": "s1"})
    assert (await outcome(nc, layout, "s1"))["ok"] is True


async def test_hostile_replies_are_refused_with_their_reason(
    bridged: Bridged, nc: Client, tmp_path: Path, devnet: str
) -> None:
    layout = Layout("cone", bridged.inbox_id, 4)
    daemon = bridged.daemon
    # A conversation the identity is not in.
    await _publish(nc, layout, "reply", {"conversationId": "ab" * 16, "text": "x", "key": "h1"})
    # A blocked one.
    bob = await Peer.create(devnet, tmp_path, "bob")
    dm = await daemon.dm_from(bob)
    await bob.send(dm, "hello")
    blocked = dm.id().hex()

    async def held() -> bool:
        await daemon.client.call("Sync", pb.SyncRequest())
        requests = await daemon.client.call("Requests", pb.RequestsRequest())
        return any(r.conversation_id == blocked for r in requests.requests)

    await until(held)
    await daemon.client.call("Block", pb.BlockRequest(conversation_id=blocked))
    await _publish(nc, layout, "reply", {"conversationId": blocked, "text": "x", "key": "h2"})
    # An oversize payload (within NATS's message limit, past cone's text limit).
    big = {"conversationId": bridged.conversation_id, "text": "x" * 600_000, "key": "h3"}
    await _publish(nc, layout, "reply", big)
    # A key used for other content: first a text by cone's own send, then markdown.
    await daemon.client.call(
        "Send", pb.SendRequest(to=bridged.conversation_id, text="original", key="h4")
    )
    await _publish(
        nc,
        layout,
        "reply",
        {"conversationId": bridged.conversation_id, "markdown": "**other**", "key": "h4"},
    )
    # Not JSON, and a key that differs from the header.
    await nc.jetstream().publish(layout.out("reply"), b"{nope", headers={"Nats-Msg-Id": "h5"})
    await nc.jetstream().publish(
        layout.out("reply"),
        json.dumps({"conversationId": bridged.conversation_id, "text": "x", "key": "a"}).encode(),
        headers={"Nats-Msg-Id": "h6"},
    )
    reasons = {k: (await outcome(nc, layout, k))["error"]["reason"] for k in ("h1", "h2", "h3")}
    assert reasons == {"h1": "not_accepted", "h2": "not_accepted", "h3": "invalid_argument"}
    assert (await outcome(nc, layout, "h4"))["error"]["reason"] == "key_conflict"
    assert (await outcome(nc, layout, "h5"))["error"]["reason"] == "invalid_json"
    assert (await outcome(nc, layout, "h6"))["error"]["reason"] == "key_mismatch"
    # Nothing of them reached the peer: only cone's own "original".
    texts = await _peer_texts(bridged, "original", 1)
    assert texts == ["original"]


async def test_kill9_between_send_and_ack_sends_once(
    home: Path, devnet: str, alice: Peer, tmp_path: Path, nats_server: NatsServer, nc: Client
) -> None:
    marker = tmp_path / "reached"
    env = jetstream_env(
        nats_server.url, CONE_FAILPOINT=SENT_FAILPOINT, CONE_FAILPOINT_FILE=str(marker)
    )
    daemon, b = await bridged_daemon(home, devnet, alice, env)
    try:
        layout = Layout("cone", b.inbox_id, 4)
        params = {"conversationId": b.conversation_id, "text": "exactly once", "key": "k1"}
        await _publish(nc, layout, "reply", params)

        async def at_failpoint() -> bool:
            return marker.exists()

        await until(at_failpoint)
        daemon.kill9()  # sent, outcome not published, JetStream not acked
        for name in ("CONE_FAILPOINT", "CONE_FAILPOINT_FILE"):
            daemon.env.pop(name)
        await daemon.restart()
        result = await outcome(nc, layout, "k1")
        assert result["ok"] is True
        assert result["deduplicated"] is True  # the redelivery found the settled key
        texts = await _peer_texts(b, "exactly once", 1)
        # Another message after it proves the peer has seen everything sent before.
        await _publish(nc, layout, "reply", {**params, "text": "after", "key": "k2"})
        texts = await _peer_texts(b, "after", 1)
        assert texts.count("exactly once") == 1
    finally:
        await daemon.__aexit__(None, None, None)


async def test_replies_in_one_conversation_are_sent_in_their_order(
    bridged: Bridged, nc: Client
) -> None:
    layout = Layout("cone", bridged.inbox_id, 4)
    texts = [f"part {i}" for i in range(6)]
    for i, text in enumerate(texts):
        params = {"conversationId": bridged.conversation_id, "text": text, "key": f"o{i}"}
        await _publish(nc, layout, "reply", params)
    seen = await _peer_texts(bridged, texts[-1], 1)
    assert [t for t in seen if t.startswith("part ")] == texts
