"""Conformance: a real `cone serve` subprocess against the devnet, every method and
error class, out-of-order answers, cancellation, stdin close, relay to a daemon, and
JSON-RPC straight on cone.sock beside a gRPC client."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import signal
import socket
import sys
import tty
from pathlib import Path
from typing import Any

import grpc
import jsonschema
import pytest

from cone.client import ConeClient
from cone.daemon.lock import StateLock
from cone.devnet import Devnet
from cone.schema import methods
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import until

from ._serve import RpcError, ServeProcess

HEX64 = "ab" * 32


def _check_result(method: str, result: Any) -> Any:
    jsonschema.validate(result, methods()[method].result_schema)
    return result


async def _receive_n(serve: ServeProcess, n: int, consumer: str = "default") -> list[Any]:
    """Long-poll through serve until `n` messages are pending for the consumer."""
    async with asyncio.timeout(60):
        while True:
            batch = await serve.call(
                "receive", {"consumer": consumer, "limit": 1000, "waitMs": 2000}
            )
            _check_result("receive", batch)
            if len(batch["messages"]) >= n:
                return list(batch["messages"])


async def _error(serve: ServeProcess, method: str, params: Any = None) -> RpcError:
    with pytest.raises(RpcError) as caught:
        await serve.call(method, params)
    return caught.value


async def test_serve_hosts_the_core_and_answers_every_method(
    home: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    async with ServeProcess(home, devnet) as serve:
        ident = _check_result("identity", await serve.call("identity"))
        assert ident["protocol"] == 1 and ident["network"] == "local"
        assert StateLock(home / "cone.lock").held_by_other()

        contact = _check_result(
            "connect", await serve.call("connect", {"to": alice.address, "name": "alice"})
        )
        contact = contact["contact"]
        assert contact["inboxId"] == alice.inbox_id and contact["name"] == "alice"
        conversation = contact["conversationId"]

        sent = _check_result(
            "send", await serve.call("send", {"to": "alice", "text": "hello", "key": "k1"})
        )
        assert sent["conversationId"] == conversation and sent["deduplicated"] is False
        again = await serve.call("send", {"to": "alice", "text": "hello, regenerated", "key": "k1"})
        assert again["messageId"] == sent["messageId"] and again["deduplicated"] is True
        data = await serve.call(
            "send", {"to": alice.address, "data": {"task": [1, 2]}, "key": "k2"}
        )
        assert data["messageId"] != sent["messageId"]

        await alice.sync()
        dm = alice.conversation(bytes.fromhex(conversation))
        await alice.send(dm, "please summarise")
        (incoming,) = await _receive_n(serve, 1)
        assert incoming["text"] == "please summarise"
        assert incoming["conversationType"] == "dm"
        assert incoming["senderInboxId"] == alice.inbox_id
        assert {"messageId", "conversationId", "sentAt", "contentType"} <= set(incoming)

        key = f"reply:{incoming['messageId']}"
        reply = _check_result(
            "reply",
            await serve.call("reply", {"conversationId": conversation, "text": "done", "key": key}),
        )
        assert reply["conversationId"] == conversation
        assert "done" in await alice.texts(bytes.fromhex(conversation))
        acked = _check_result(
            "ack", await serve.call("ack", {"messageIds": [incoming["messageId"]]})
        )
        assert acked == {"acknowledged": 1}
        empty = await serve.call("receive", {"waitMs": 0})
        assert empty == {"messages": [], "more": False}

        bob = await Peer.create(devnet, tmp_path, "bob")
        bob_dm = await bob.client.conversations().find_or_create_dm_by_identity(
            bob.identifier().__class__(
                identifier=ident["address"], identifier_kind=bob.identifier().identifier_kind
            ),
            __import__("xmtp_bindings.xmtpv3", fromlist=["x"]).FfiCreateDmOptions(
                message_disappearing_settings=None
            ),
        )
        await bob.send(bob_dm, "hi, stranger here")
        async with asyncio.timeout(60):
            while not (held := _check_result("requests", await serve.call("requests"))["requests"]):
                await serve.call("sync")
        (request,) = held
        assert request["peerInboxId"] == bob.inbox_id and "stranger" not in json.dumps(request)
        assert _check_result(
            "accept", await serve.call("accept", {"conversationId": request["conversationId"]})
        ) == {"accepted": True}
        (from_bob,) = await _receive_n(serve, 1)
        assert from_bob["text"] == "hi, stranger here"
        assert _check_result(
            "block", await serve.call("block", {"conversationId": request["conversationId"]})
        ) == {"blocked": True}
        assert _check_result("sync", await serve.call("sync")) == {"synced": True}
        status = _check_result("status", await serve.call("status"))
        assert status["identity"]["inboxId"] == ident["inboxId"]
        assert await serve.close() == 0
    assert not StateLock(home / "cone.lock").held_by_other()


async def test_every_error_class_is_answered_with_its_code_and_reason(
    home: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    async with ServeProcess(home, devnet) as serve:
        await serve.call("identity")
        serve.send_raw(b"{not json\n")
        serve.send_raw(b"\xc3\x28\n")
        serve.send({"jsonrpc": "2.0", "id": "no-method"})
        serve.send([])
        answers = await serve.next_answers(5)
        codes = sorted(a["error"]["code"] for a in answers[1:5])
        assert codes == [-32700, -32700, -32600, -32600]

        assert (await _error(serve, "frobnicate")).code == -32601
        bad = await _error(serve, "receive", {"waitMs": 30001})
        assert (bad.code, bad.data) == (-32602, {"reason": "invalid_argument", "field": "waitMs"})
        unknown = await _error(serve, "receive", {"cursor": 3})
        assert unknown.data["field"] == "cursor"

        missing = await _error(serve, "accept", {"conversationId": "ab" * 16})
        assert (missing.code, missing.data["reason"]) == (-32002, "unknown_conversation")
        not_on_xmtp = await _error(serve, "connect", {"to": "0x" + "12" * 20})
        assert (not_on_xmtp.code, not_on_xmtp.data["reason"]) == (-32002, "not_on_xmtp")

        await serve.call("connect", {"to": alice.address, "name": "al"})
        # The core's own checks travel back with the same code and field.
        too_big = await _error(serve, "send", {"to": "al", "text": "日" * 200_000, "key": "big"})
        assert (too_big.code, too_big.data["field"]) == (-32602, "text")

        bob = await Peer.create(devnet, tmp_path, "bob")
        taken = await _error(serve, "connect", {"to": bob.address, "name": "al"})
        assert (taken.code, taken.data["reason"]) == (-32003, "contact_name_taken")

        await serve.call("send", {"to": "al", "text": "one", "key": "same"})
        conflict = await _error(serve, "send", {"to": bob.address, "text": "one", "key": "same"})
        assert (conflict.code, conflict.data["reason"]) == (-32003, "key_conflict")


async def test_answers_come_back_out_of_order_and_cancellation_is_silent(
    home: Path, devnet: str, alice: Peer
) -> None:
    async with ServeProcess(home, devnet) as serve:
        contact = (await serve.call("connect", {"to": alice.address}))["contact"]
        poll = serve.request("receive", {"waitMs": 30000, "consumer": "w"})
        quick = serve.request("identity")
        assert "result" in await serve.answer_to(quick)
        assert len(serve.answers) == 2  # connect, identity: the receive still waits
        serve.cancel(poll)
        # The cancelled receive's messages stay pending for the consumer.
        await alice.sync()
        await alice.send(alice.conversation(bytes.fromhex(contact["conversationId"])), "still here")
        (message,) = await _receive_n(serve, 1, consumer="w")
        assert message["text"] == "still here"
        assert await serve.close() == 0
        assert all(json.dumps(poll) != json.dumps(a.get("id")) for a in serve.answers)


async def test_closing_stdin_ends_long_polls_and_releases_the_identity(
    home: Path, devnet: str
) -> None:
    async with ServeProcess(home, devnet) as serve:
        await serve.call("identity")
        serve.request("receive", {"waitMs": 30000})
        serve.request("identity")
        await serve.next_answers(2)
        assert await serve.close() == 0
        # The poll was ended unanswered: one that ran out its 30 s would be a third.
        assert len(serve.answers) == 2
    assert not StateLock(home / "cone.lock").held_by_other()
    # The identity is free again: a daemon takes it.
    async with DaemonProcess(home, devnet) as daemon:
        assert (await daemon.client.identity()).protocol == 1


async def test_serve_relays_to_a_running_daemon(home: Path, devnet: str, alice: Peer) -> None:
    async with DaemonProcess(home, devnet) as daemon:
        expected = await daemon.client.identity()
        async with ServeProcess(home, devnet) as serve:
            ident = await serve.call("identity")
            assert ident["inboxId"] == expected.inbox_id
            contact = (await serve.call("connect", {"to": alice.address}))["contact"]
            sent = await serve.call("send", {"to": alice.address, "text": "via relay", "key": "r1"})
            assert sent["conversationId"] == contact["conversationId"]
            assert await serve.close() == 0
        # The daemon still holds the identity and serves.
        assert StateLock(home / "cone.lock").held_by_other()
        assert (await daemon.client.identity()).inbox_id == expected.inbox_id
        stopped = await daemon.stop()
        assert stopped == 0
    async with ServeProcess(home, devnet) as serve:
        assert (await serve.call("identity"))["inboxId"] == expected.inbox_id


async def test_a_daemon_that_goes_away_is_an_unavailable_error(home: Path, devnet: str) -> None:
    async with DaemonProcess(home, devnet) as daemon:
        async with ServeProcess(home, devnet) as serve:
            await serve.call("identity")
            daemon.kill9()
            gone = await _error(serve, "identity")
            assert (gone.code, gone.data["reason"]) == (-32001, "daemon_unavailable")
            assert await serve.close() == 0


def _socket_session(path: Path, lines: list[bytes], answers: int) -> list[Any]:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(b"".join(lines))
        received = b""
        while received.count(b"\n") < answers:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(65536):
            received += chunk
    return [json.loads(line) for line in received.splitlines()]


async def test_jsonrpc_on_cone_sock_beside_a_grpc_client(home: Path, devnet: str) -> None:
    async with DaemonProcess(home, devnet) as daemon:
        lines = [
            b'{"jsonrpc":"2.0","id":1,"method":"receive","params":{"waitMs":30000}}\n',
            b'{"jsonrpc":"2.0","id":2,"method":"identity"}\n',
            b'{"jsonrpc":"2.0","id":3,"method":"receive","params":{"limit":0}}\n',
            b"not json\n",
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n',
        ]
        loop = asyncio.get_running_loop()
        session = loop.run_in_executor(None, _socket_session, daemon.socket, lines, 3)
        async with ConeClient(daemon.socket) as grpc_client:
            grpc_ident = await asyncio.gather(*(grpc_client.identity() for _ in range(20)))
        answers = await session
        by_id = {json.dumps(a["id"]): a for a in answers}
        assert set(by_id) == {"2", "3", "null"}
        assert by_id["2"]["result"]["inboxId"] == grpc_ident[0].inbox_id
        assert by_id["3"]["error"]["data"]["field"] == "limit"
        assert by_id["null"]["error"]["code"] == -32700


async def test_serve_also_serves_jsonrpc_on_its_socket_when_it_hosts_the_core(
    home: Path, devnet: str
) -> None:
    async with ServeProcess(home, devnet) as serve:
        ident = await serve.call("identity")
        loop = asyncio.get_running_loop()
        lines = [b'{"jsonrpc":"2.0","id":"s","method":"identity"}\n']
        (answer,) = await loop.run_in_executor(None, _socket_session, home / "cone.sock", lines, 1)
        assert answer["result"]["inboxId"] == ident["inboxId"]


async def test_a_thousand_outstanding_requests_through_serve_are_all_answered(
    home: Path, devnet: str
) -> None:
    async with DaemonProcess(home, devnet):
        async with ServeProcess(home, devnet) as serve:
            await serve.call("identity")
            polls = [
                serve.request("receive", {"waitMs": 3000, "consumer": "many"}) for _ in range(1500)
            ]
            quick = [serve.request("identity") for _ in range(500)]
            for id_ in quick:
                assert "result" in await serve.answer_to(id_)
            for id_ in polls:
                assert (await serve.answer_to(id_))["result"] == {"messages": [], "more": False}
            assert await serve.close() == 0


async def test_serve_reads_and_writes_regular_files(
    home: Path, devnet: str, tmp_path: Path
) -> None:
    requests = tmp_path / "in.jsonl"
    requests.write_bytes(b'{"jsonrpc":"2.0","id":1,"method":"identity"}\n[]\n')
    out = tmp_path / "out.jsonl"
    with requests.open("rb") as stdin, out.open("wb") as stdout:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cone", "serve", "--home", str(home), "--api-url", devnet,
            stdin=stdin, stdout=stdout, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            _, stderr = await proc.communicate()
    assert proc.returncode == 0, stderr
    answers = {json.dumps(a["id"]): a for a in map(json.loads, out.read_bytes().splitlines())}
    assert answers["1"]["result"]["protocol"] == 1
    assert answers["null"]["error"]["code"] == -32600


async def test_serve_started_with_a_daemon_waits_for_its_socket(
    home: Path, devnet: str, devnet_node: Devnet
) -> None:
    for method in devnet_node.faults.methods:  # a slow network: the daemon starts slowly
        devnet_node.faults.set_latency(method, 0.1)
    daemon = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", "daemon", "--home", str(home), "--api-url", devnet,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # As soon as the daemon holds the lock, well before its socket is up.
        await until(lambda: _held(home))
        assert not (home / "cone.sock").exists()
        async with ServeProcess(home, devnet) as serve:
            assert (await serve.call("identity"))["protocol"] == 1
            assert await serve.close() == 0
    finally:
        devnet_node.faults.clear()
        daemon.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            await daemon.wait()


async def _held(home: Path) -> bool:
    return StateLock(home / "cone.lock").held_by_other()


async def test_a_serve_relays_to_a_serve_that_hosts_the_core(home: Path, devnet: str) -> None:
    async with ServeProcess(home, devnet) as host:
        ident = await host.call("identity")
        async with ServeProcess(home, devnet) as relay:
            assert (await relay.call("identity"))["inboxId"] == ident["inboxId"]
            assert await relay.close() == 0
        assert (await host.call("identity"))["inboxId"] == ident["inboxId"]


async def test_sigterm_stops_serve_cleanly_and_releases_the_identity(
    home: Path, devnet: str
) -> None:
    async with ServeProcess(home, devnet) as serve:
        await serve.call("identity")
        serve.request("receive", {"waitMs": 30000})
        assert serve.proc is not None
        serve.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await serve.proc.wait() == 0
    assert not StateLock(home / "cone.lock").held_by_other()


async def test_reply_into_a_request_is_not_accepted(home: Path, devnet: str, alice: Peer) -> None:
    async with ServeProcess(home, devnet) as serve:
        ident = await serve.call("identity")
        from xmtp_bindings import xmtpv3 as ffi

        ours = alice.identifier().__class__(
            identifier=ident["address"], identifier_kind=alice.identifier().identifier_kind
        )
        dm = await alice.client.conversations().find_or_create_dm_by_identity(
            ours, ffi.FfiCreateDmOptions(message_disappearing_settings=None)
        )
        await alice.send(dm, "hello?")
        async with asyncio.timeout(60):
            while not (held := (await serve.call("requests"))["requests"]):
                await serve.call("sync")
        refused = await _error(
            serve, "reply", {"conversationId": held[0]["conversationId"], "text": "x", "key": "r"}
        )
        assert (refused.code, refused.data["reason"]) == (-32004, "not_accepted")


async def test_an_unusable_state_directory_exits_with_the_state_error_code(
    home: Path, devnet: str, tmp_path: Path
) -> None:
    async with ServeProcess(home, devnet) as serve:
        await serve.call("identity")
    wrong = tmp_path / "wrong.key"
    wrong.write_text("11" * 32)
    async with ServeProcess(home, devnet, "--key-file", str(wrong)) as serve:
        assert serve.proc is not None
        async with asyncio.timeout(60):
            code = await serve.proc.wait()
        assert code == 6, serve.stderr()
        assert serve.answers == []


async def test_serve_on_a_terminal_answers_and_stops_at_end_of_input(
    home: Path, devnet: str
) -> None:
    leader, follower = pty.openpty()
    try:
        tty.setraw(follower)  # no echo, no line editing: bytes as they are typed
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cone", "serve", "--home", str(home), "--api-url", devnet,
            stdin=follower, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.stdout is not None
        os.write(leader, b'{"jsonrpc":"2.0","id":1,"method":"identity"}\n')
        async with asyncio.timeout(60):
            answer = json.loads(await proc.stdout.readline())
        assert answer["result"]["protocol"] == 1
        os.close(leader)  # the terminal hangs up: end of input
        leader = -1
        async with asyncio.timeout(30):
            assert await proc.wait() == 0
    finally:
        os.close(follower)
        if leader >= 0:
            os.close(leader)


async def test_serve_stops_when_its_reader_goes_away(home: Path, devnet: str) -> None:
    async with ServeProcess(home, devnet) as serve:
        await serve.call("identity")
        assert serve.proc is not None and serve.proc.stdout is not None
        serve.request("receive", {"waitMs": 30000})
        transport = serve.proc.stdout._transport  # type: ignore[attr-defined]  # no public close
        transport.close()
        for _ in range(3):
            serve.request("identity")
        async with asyncio.timeout(30):
            assert await serve.proc.wait() == 0
    assert not StateLock(home / "cone.lock").held_by_other()


async def test_a_rate_limit_from_the_network_is_32005(
    home: Path, devnet: str, devnet_node: Devnet, alice: Peer
) -> None:
    async with ServeProcess(home, devnet) as serve:
        await serve.call("identity")
        devnet_node.faults.fail_next(
            "GetInboxIds", 100, grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit exceeded"
        )
        try:
            limited = await _error(serve, "connect", {"to": alice.address})
        finally:
            devnet_node.faults.clear()
        assert (limited.code, limited.data["reason"]) == (-32005, "rate_limited"), limited.error
