"""The network's state is the node's answer now: a stopped node is unreachable at the
next status call, and a node that does not know this identity (a devnet restarted
without its state) is named as such, in status and in the sends' own reason. On V3
and on D14N alike (there the probe asks the node the gateway names, with D14N reads)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from cone.commands._render import STALE
from cone.errors import FailedPrecondition
from conepb.v1 import cone_pb2 as pb
from support import wire
from support.cli import cone_cli
from support.daemons import BACKENDS, DaemonProcess
from support.devnet_process import DevnetProcess
from support.peers import Peer
from support.waiting import until


def _gateway(backend: str, url: str) -> str | None:
    """The devnet is its own gateway: on D14N the daemon is given its URL as one."""
    return url if backend == "d14n" else None


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
async def test_status_says_unreachable_as_soon_as_the_node_stops_and_reachable_when_back(
    home: Path, tmp_path: Path, backend: str
) -> None:
    db = str(tmp_path / "devnet.db")
    node = await DevnetProcess.start(tmp_path, "--db", db)
    try:
        async with DaemonProcess(home, node.url, gateway_url=_gateway(backend, node.url)) as daemon:
            assert (await daemon.status()).network_state == pb.NETWORK_STATE_REACHABLE
            assert await node.stop() == 0
            # No waiting: the status call asks the node itself.
            status = await daemon.status()
            assert status.network_state == pb.NETWORK_STATE_UNREACHABLE
            # The probe's own warning (a catch-up's sync may have failed meanwhile too,
            # and that warning quotes libxmtp's "cannot be reached").
            (warning,) = [w for w in status.warnings if w.startswith("the XMTP network at")]
            # On D14N the probe asks the gateway for its nodes first (as libxmtp does).
            asked = f"the gateway at {node.url}" if backend == "d14n" else "the node"
            assert f"({asked} does not answer (connection refused))" in warning, warning
            # The commands side by side: the send waits out libxmtp's retries meanwhile.
            where = ["--home", str(home)]
            text, as_json, listed, *shown, sent = await asyncio.gather(
                cone_cli(["status", *where]),
                cone_cli(["status", *where, "--json"]),
                cone_cli(["requests", *where, "--json"]),
                cone_cli(["requests", *where]),
                cone_cli(["conversations", *where]),
                cone_cli(["send", wire.address(), "hi", *where]),
            )
            assert text.code == 1, text.err  # unhealthy
            assert "network UNREACHABLE (the node does not answer now)" in text.out
            assert "  network     UNREACHABLE" in text.out
            assert as_json.json()["networkState"] == "unreachable"
            # Answers from the store say they may be stale, in JSON and in text.
            assert listed.json() == {"requests": [], "stale": True}
            for one in shown:
                assert one.code == 0 and one.err == ""
                assert one.out.splitlines()[-1] == STALE
            assert "ClientError" not in sent.out + sent.err
            assert "tcp connect error" not in sent.out + sent.err

            node = await DevnetProcess.start(tmp_path, "--db", db, "--port", str(node.port))

            async def reachable() -> bool:
                return (await daemon.status()).network_state == pb.NETWORK_STATE_REACHABLE

            await until(reachable)
            text = await cone_cli(["status", "--home", str(home)])
            assert "  network     reachable" in text.out
            assert "stale" not in (await cone_cli(["requests", "--home", str(home)])).out
    finally:
        if node.process.returncode is None:
            await node.stop()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_node_that_forgot_the_identity_is_named_in_status_and_in_the_sends_reason(
    home: Path, tmp_path: Path, backend: str
) -> None:
    node = await DevnetProcess.start(tmp_path)  # a throwaway node, in memory
    try:
        async with DaemonProcess(home, node.url, gateway_url=_gateway(backend, node.url)) as daemon:
            alice = await Peer.create(node.url, tmp_path, "alice", d14n=backend == "d14n")
            contact = (
                await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))
            ).contact
            assert (await daemon.status()).network_state == pb.NETWORK_STATE_REACHABLE
            # The node restarts empty on the same port: it knows nobody now. A send
            # made while it is down waits in the outbox.
            assert await node.stop() == 0
            queued = await daemon.client.call(
                "Send", pb.SendRequest(to=contact.conversation_id, text="queued", key="q1")
            )
            assert not queued.published
            node = await DevnetProcess.start(tmp_path, "--port", str(node.port))

            async def forgotten() -> pb.StatusResponse | None:
                s = await daemon.status()
                return s if s.network_state == pb.NETWORK_STATE_IDENTITY_UNKNOWN else None

            status = await until(forgotten)
            (warning,) = [w for w in status.warnings if "does not know this identity" in w]
            assert "node reset? wrong network?" in warning
            # On D14N the node the gateway names, asked with D14N reads.
            asked = f"node 100 at {node.url}" if backend == "d14n" else "the node"
            assert f"{asked} holds no identity updates for inbox" in warning, warning

            for request in (
                pb.SendRequest(to=alice.address, text="anyone there?", key="k1"),
                pb.SendRequest(to=contact.conversation_id, text="hello?", key="k2"),
            ):
                with pytest.raises(FailedPrecondition) as refused:
                    await daemon.client.call("Send", request)
                assert refused.value.reason == "identity_unknown"
                assert "node reset? wrong network?" in refused.value.message

            # What waited is held with the reason, not retried at its backoff in silence
            # (unless its retry reached the empty node before cone asked it: the node
            # then took it, and the key settled).
            async def settled_or_held() -> list[pb.OutboxEntry] | bool:
                outbox = list((await daemon.status()).outbox)
                if not outbox:
                    return True
                return [o for o in outbox if "does not know this identity" in o.last_error]

            found = await until(settled_or_held)
            if found is not True:
                assert isinstance(found, list)
                (entry,) = found
                assert entry.key == "q1" and entry.state == "failing"
                assert entry.last_reason == "identity_unknown"
                assert entry.next_attempt_at.ToSeconds() - time.time() > 200  # 5 minutes
            assert [o.key for o in (await daemon.status()).outbox] in ([], ["q1"])  # no new key

            where = ["--home", str(home)]
            text, as_json, sent = await asyncio.gather(  # independent: side by side
                cone_cli(["status", *where]),
                cone_cli(["status", *where, "--json"]),
                cone_cli(["send", contact.conversation_id, "hi", *where]),
            )
            assert "IDENTITY UNKNOWN (the node does not know this identity: node reset? " in (
                text.out
            )
            assert as_json.json()["networkState"] == "identity_unknown"
            assert sent.code == 4 and "node reset? wrong network?" in sent.err
            assert "ClientError" not in sent.err and "Api Stats" not in sent.err
    finally:
        await node.stop()


@pytest.mark.slow
async def test_a_one_shot_command_with_the_node_down_prints_its_answer_and_no_log(
    home: Path, tmp_path: Path
) -> None:
    node = await DevnetProcess.start(tmp_path)
    try:
        made = await cone_cli(["init", "--home", str(home), "--api-url", node.url])
        assert made.code == 0, made.err
    finally:
        assert await node.stop() == 0
    # No daemon: the command hosts the identity itself, with the node down.
    where = ["--home", str(home), "--api-url", node.url]
    shown = await cone_cli(["requests", *where], tty=True)
    assert shown.code == 0
    assert shown.out.splitlines() == ["no requests", STALE]
    assert shown.err == ""  # no libxmtp, grpc or cone warning lines
    sent = await cone_cli(["send", wire.address(), "hi", *where], tty=True)
    assert sent.code == 5
    assert sent.err.startswith("cone send: ") and len(sent.err.splitlines()) == 1
    assert "the XMTP node cannot be reached" in sent.err and "ClientError" not in sent.err
