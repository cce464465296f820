"""The HTTP API against a real daemon on a devnet: JSON-RPC as on cone.sock, the event
stream (pending until acked, resumable, heartbeats, a kill -9 survived), health and
metrics."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from support.http_daemon import HttpDaemon, event_stream, next_message
from support.peers import Peer
from support.ports import fresh_port
from support.waiting import until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def _on_socket(daemon: HttpDaemon, line: bytes) -> Any:
    """One JSON-RPC line on cone.sock, its one answer."""
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket))
    try:
        writer.write(line + b"\n")
        await writer.drain()
        return json.loads(await asyncio.wait_for(reader.readline(), 30))
    finally:
        writer.close()


CASES: list[Any] = [
    {"jsonrpc": "2.0", "id": 1, "method": "identity"},
    {"jsonrpc": "2.0", "id": "a", "method": "nope"},
    {"jsonrpc": "2.0", "id": 2, "method": "send", "params": {"to": "not an address"}},
    {"jsonrpc": "2.0", "id": 3, "method": "receive", "params": {"limit": 0}},
    {"jsonrpc": "2.0", "method": 7},
    [
        {"jsonrpc": "2.0", "id": 4, "method": "identity"},
        {"jsonrpc": "2.0", "id": 5, "method": "ack", "params": {"messageIds": ["ff"]}},
        {"jsonrpc": "2.0", "method": "identity"},
        3,
    ],
]


async def test_json_rpc_answers_as_on_the_socket(
    daemon: HttpDaemon, session: aiohttp.ClientSession
) -> None:
    for case in CASES:
        status, answer = await daemon.rpc(case, session)
        assert status == 200
        assert answer == await _on_socket(daemon, json.dumps(case).encode()), case
    # A notification alone: nothing to answer.
    status, answer = await daemon.rpc({"jsonrpc": "2.0", "method": "identity"}, session)
    assert (status, answer) == (204, None)
    # Unparseable JSON: -32700, as on the socket.
    async with session.post(
        daemon.url + "api/v1/rpc",
        data=b"{nope",
        headers={**daemon.auth, "Content-Type": "application/json"},
    ) as r:
        assert await r.json() == await _on_socket(daemon, b"{nope")


async def _rpc_count(daemon: HttpDaemon, session: aiohttp.ClientSession, labels: str) -> float:
    async with session.get(daemon.url + "metrics", headers=daemon.auth) as r:
        text = await r.text()
    for line in text.splitlines():
        if line.startswith(f"cone_rpcs_total{{{labels}}}"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_a_client_that_goes_away_cancels_its_long_poll(
    daemon: HttpDaemon, session: aiohttp.ClientSession
) -> None:
    labels = 'code="CANCELLED",method="Receive"'
    before = await _rpc_count(daemon, session, labels)
    body = {"jsonrpc": "2.0", "id": 1, "method": "receive", "params": {"waitMs": 30000}}
    post = asyncio.create_task(daemon.rpc(body, session))

    async def waiting() -> bool:
        async with session.get(daemon.url + "metrics", headers=daemon.auth) as r:
            return 'cone_rpcs_in_flight{method="Receive"} 1.0' in await r.text()

    await until(waiting, timeout=20)
    post.cancel()  # the connection closes
    await asyncio.gather(post, return_exceptions=True)

    async def cancelled() -> bool:
        return await _rpc_count(daemon, session, labels) == before + 1

    await until(cancelled, timeout=10)  # long before the 30 s wait would have ended


async def _call(
    daemon: HttpDaemon, session: aiohttp.ClientSession, method: str, **params: Any
) -> Any:
    status, answer = await daemon.rpc(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, session
    )
    assert status == 200 and "result" in answer, answer
    return answer["result"]


async def _accepted_dm(peer: Peer, daemon: HttpDaemon, session: aiohttp.ClientSession) -> Any:
    """A DM from `peer` to the daemon, accepted through the HTTP API; its first
    message ("hello") is pending."""
    from xmtp_bindings import xmtpv3 as ffi

    ident = await _call(daemon, session, "identity")
    kind = peer.identifier().identifier_kind
    dm = await peer.client.conversations().find_or_create_dm_by_identity(
        ffi.FfiIdentifier(identifier=ident["address"], identifier_kind=kind),
        ffi.FfiCreateDmOptions(message_disappearing_settings=None),
    )
    await peer.send(dm, "hello")

    async def held() -> list[Any]:
        result = await _call(daemon, session, "requests")
        return [r for r in result["requests"] if r.get("pendingMessages")]

    (request,) = await until(held)
    await _call(daemon, session, "accept", conversationId=request["conversationId"])
    return dm


async def test_events_carry_messages_until_acked_and_resume_after_the_last_id(
    daemon: HttpDaemon, session: aiohttp.ClientSession, alice: Peer
) -> None:
    dm = await _accepted_dm(alice, daemon, session)
    async with event_stream(daemon, session, "consumer=web&heartbeat=0.5") as events:
        first = await next_message(events)
        message = first.json()
        assert message["text"] == "hello"
        assert first.id == str(message["sequence"])
        # The same shape as receive's (which does not ack either).
        received = await _call(daemon, session, "receive", consumer="web")
        assert [m["messageId"] for m in received["messages"]] == [message["messageId"]]
        assert {k: v for k, v in received["messages"][0].items() if k != "deliveries"} == {
            k: v for k, v in message.items() if k != "deliveries"
        }
        await alice.send(dm, "second")
        second = await next_message(events)
        assert second.json()["text"] == "second"
        # Heartbeats while nothing comes.
        async with asyncio.timeout(10):
            while not (await events.get()).comment:
                pass
    # Not acked: a new stream (no Last-Event-ID) starts again from the oldest.
    async with event_stream(daemon, session, "consumer=web") as events:
        assert (await next_message(events)).json()["text"] == "hello"
    # With Last-Event-ID it resumes after that event.
    async with event_stream(daemon, session, "consumer=web", last_event_id=first.id) as events:
        assert (await next_message(events)).json()["text"] == "second"
    # Acked messages are gone for that consumer, not for another.
    await _call(daemon, session, "ack", consumer="web", messageIds=[message["messageId"]])
    async with event_stream(daemon, session, "consumer=web") as events:
        assert (await next_message(events)).json()["text"] == "second"
    async with event_stream(daemon, session, "consumer=other") as events:
        assert (await next_message(events)).json()["text"] == "hello"
    async with session.get(daemon.url + "metrics", headers=daemon.auth) as r:
        text = await r.text()
    assert "cone_messages_ingested_total 2.0" in text
    assert "cone_messages_unreadable_total 0.0" in text


async def test_a_request_is_announced_on_the_event_stream_without_its_content(
    daemon: HttpDaemon, session: aiohttp.ClientSession, alice: Peer
) -> None:
    from xmtp_bindings import xmtpv3 as ffi

    ident = await _call(daemon, session, "identity")
    async with event_stream(daemon, session, "consumer=web&heartbeat=0.5") as events:
        # Nothing moved yet: heartbeats only.
        async with asyncio.timeout(10):
            while not (await events.get()).comment:
                pass
        dm = await alice.client.conversations().find_or_create_dm_by_identity(
            ffi.FfiIdentifier(
                identifier=ident["address"], identifier_kind=alice.identifier().identifier_kind
            ),
            ffi.FfiCreateDmOptions(message_disappearing_settings=None),
        )
        await alice.send(dm, "may I?")
        # The request's message enters the inbox: an `inbox` event (no id, no content),
        # never a `message` event (a request's content is not delivered).
        async with asyncio.timeout(60):
            while True:
                event = await events.get()
                assert not event.is_message, event  # heartbeats come between
                if event.event == "inbox":
                    break
        assert event.id is None and event.json()["headSequence"] >= 1
    (request,) = (await _call(daemon, session, "requests"))["requests"]
    assert request["pendingMessages"] == 1


async def test_a_bad_consumer_is_refused_as_on_json_rpc(
    daemon: HttpDaemon, session: aiohttp.ClientSession
) -> None:
    async with session.get(
        daemon.url + "api/v1/events?consumer=no%20spaces", headers=daemon.auth
    ) as r:
        assert r.status == 400
        error = (await r.json())["error"]
    _, answer = await daemon.rpc(
        {"jsonrpc": "2.0", "id": 1, "method": "peek", "params": {"consumer": "no spaces"}},
        session,
    )
    assert error == answer["error"]


async def test_an_event_stream_survives_a_kill_9_of_the_daemon(
    daemon: HttpDaemon, session: aiohttp.ClientSession, alice: Peer
) -> None:
    """The client sees the stream end, reconnects with Last-Event-ID once the daemon is
    back, and gets what was sent while it was down: nothing is lost."""
    dm = await _accepted_dm(alice, daemon, session)
    seen: list[str] = []
    last: str | None = None
    async with event_stream(daemon, session, "consumer=c&heartbeat=0.5") as events:
        event = await next_message(events)
        seen.append(event.json()["text"])
        last = event.id
        daemon.kill9()
    for text in ("while down 1", "while down 2"):
        await alice.send(dm, text)
    await daemon.restart()

    async def reconnected() -> Any:
        try:
            return await session.get(daemon.url + "api/v1/health")
        except aiohttp.ClientError:
            return None

    (await until(reconnected)).close()
    async with event_stream(daemon, session, "consumer=c", last_event_id=last) as events:
        while len(seen) < 3:
            seen.append((await next_message(events)).json()["text"])
    assert seen == ["hello", "while down 1", "while down 2"]


async def test_health_says_what_cone_status_says(
    daemon: HttpDaemon, session: aiohttp.ClientSession
) -> None:
    async def healthy() -> bool:
        async with session.get(daemon.url + "api/v1/health", headers=daemon.auth) as r:
            return r.status == 200 and await r.json() == {"healthy": True, "problems": []}

    await until(healthy)
    async with session.get(daemon.url + "api/v1/health") as r:
        assert (r.status, await r.json()) == (200, {"healthy": True})


async def test_metrics_are_prometheus_text_with_the_documented_names(
    daemon: HttpDaemon, session: aiohttp.ClientSession
) -> None:
    await _call(daemon, session, "receive", waitMs=10)
    async with session.get(daemon.url + "metrics", headers=daemon.auth) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = await r.text()
    for name in (
        'cone_rpcs_total{code="OK",method="Receive"}',
        'cone_rpc_seconds_bucket{le="0.001",method="Receive"}',
        "cone_receive_waits_total 1.0",
        "cone_receive_wait_seconds_count 1.0",
        "cone_send_seconds_count 0.0",
        "cone_up 1.0",
        "cone_ingest_healed_total 0.0",
        "cone_requests_dropped_total 0.0",
        'cone_outbox_messages{state="failing"} 0.0',
        'cone_stream_connected{stream="messages"}',
        'cone_network_state{state="reachable"} 1.0',
    ):
        assert name in text, name


async def test_cone_serve_hosting_the_core_serves_http_too(
    home: Path, devnet: str, session: aiohttp.ClientSession
) -> None:
    port = fresh_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", "serve", "--home", str(home), "--api-url", devnet,
        "--http", f"127.0.0.1:{port}",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(CASES[0]).encode() + b"\n")
        on_stdio = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        auth = {"Authorization": f"Bearer {(home / 'http.token').read_text().strip()}"}
        async with session.post(
            f"http://127.0.0.1:{port}/api/v1/rpc", json=CASES[0], headers=auth
        ) as r:
            assert await r.json() == on_stdio
    finally:
        proc.stdin.close()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
