"""Starting, working and recovering without the network; failing clearly without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cone.devnet import Devnet
from cone.errors import FailedPrecondition, Unavailable
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, run_cone
from support.devnet_process import DevnetProcess
from support.peers import Peer
from support.waiting import receive_n, until


async def test_a_registered_identity_starts_offline_and_catches_up_when_the_node_returns(
    home: Path, tmp_path: Path
) -> None:
    db = str(tmp_path / "devnet.db")
    node = await DevnetProcess.start(tmp_path, "--db", db)
    alice = await Peer.create(node.url, tmp_path, "alice")
    bob = await Peer.create(node.url, tmp_path, "bob")
    daemon = await DaemonProcess(home, node.url).start()
    try:
        contact = (
            await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address, name="alice"))
        ).contact
        await alice.sync()
        alice_dm = alice.conversation(bytes.fromhex(contact.conversation_id))
        await alice.send(alice_dm, "before the outage")
        await receive_n(daemon.client, 1)
        await bob.send(await daemon.dm_from(bob), "a stranger asks")

        async def request_held() -> list[pb.ConversationRequest]:
            reqs = (await daemon.client.call("Requests", pb.RequestsRequest())).requests
            return [r for r in reqs if r.pending_messages]

        (request,) = await until(request_held)
        identity = await daemon.client.identity()
        assert await daemon.stop() == 0
    except BaseException:
        await daemon.__aexit__(None, None, None)
        raise
    finally:
        assert await node.stop() == 0

    # The node is down: the registered identity starts anyway, from its store.
    await daemon.start()
    try:
        assert await daemon.client.identity() == identity
        status = await daemon.status()
        assert status.network_state == pb.NETWORK_STATE_UNREACHABLE
        assert any("cannot be reached" in w for w in status.warnings)
        (pending,) = (await daemon.client.receive(wait_ms=0)).messages
        assert pending.text == "before the outage"
        assert await daemon.client.ack([pending.message_id]) == 1
        (held,) = (await daemon.client.call("Requests", pb.RequestsRequest())).requests
        assert held.conversation_id == request.conversation_id
        await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=held.conversation_id))
        (asked,) = (await daemon.client.receive(wait_ms=0)).messages
        assert asked.text == "a stranger asks"
        await daemon.client.ack([asked.message_id])
        sent = await daemon.client.call(
            "Send", pb.SendRequest(to="alice", text="written offline", key="offline-1")
        )
        assert not sent.published
        assert [o.key for o in (await daemon.status()).outbox] == ["offline-1"]
        with pytest.raises(Unavailable) as err:  # nothing pending: no silent empty
            await daemon.client.receive(wait_ms=0)
        assert err.value.reason == "sync_failed"

        # The node comes back on its port and database: streams, catch-up and the
        # outbox recover by themselves.
        node = await DevnetProcess.start(tmp_path, "--db", db, "--port", str(node.port))
        await alice.send(alice_dm, "after the outage")

        async def recovered() -> pb.StatusResponse | None:
            s = await daemon.status()
            ok = s.network_state == pb.NETWORK_STATE_REACHABLE and not s.outbox
            return s if ok and all(st.connected for st in s.streams) else None

        status = await until(recovered)
        assert not any("cannot be reached" in w for w in status.warnings)
        (after,) = await receive_n(daemon.client, 1)
        assert after.text == "after the outage"

        async def alice_got() -> list[str]:
            return [t for t in await alice.texts(alice_dm.id()) if t == "written offline"]

        assert await until(alice_got) == ["written offline"]
        assert sent.message_id in {bytes(m.id).hex() for m in await alice.messages(alice_dm.id())}
    finally:
        await daemon.__aexit__(None, None, None)
        await node.stop()


async def test_a_first_start_without_the_node_fails_with_one_clear_line(home: Path) -> None:
    # Nothing listens on port 1 (privileged, unused): a connection is refused at once.
    code, err = await run_cone(["daemon", "--home", str(home), "--api-url", "http://127.0.0.1:1"])
    assert code == 5  # Unavailable, as cone.errors' table says
    lines = [line for line in err.decode().splitlines() if line.startswith("cone daemon:")]
    assert lines == [
        "cone daemon: cannot reach the XMTP node at http://127.0.0.1:1 to register this new "
        "identity: is `cone devnet` running there? (--network and --api-url choose the node)"
    ]
    assert "Api Stats" not in err.decode()
    assert "GetInboxIds" not in err.decode()


async def test_after_the_v3_cutover_sends_fail_with_their_own_reason_and_status_says_why(
    home: Path, alice: Peer, devnet_node: Devnet
) -> None:
    # As on a network with no known gateway (`dev`, its URL overridden to the devnet):
    # cone stays on V3 (on `local` it moves itself, tests/core/test_cutover.py).
    async with DaemonProcess(home, devnet_node.url, extra_env={"CONE_NETWORK": "dev"}) as daemon:
        await _refused_after_the_cutover(daemon, alice, devnet_node)


async def _refused_after_the_cutover(
    daemon: DaemonProcess, alice: Peer, devnet_node: Devnet
) -> None:
    await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address, name="alice"))
    devnet_node.faults.set_v3_cutover(True)
    for _ in range(2):  # a retry with the same key meets the same refusal
        with pytest.raises(FailedPrecondition) as err:
            await daemon.client.call(
                "Send", pb.SendRequest(to="alice", text="after the cutover", key="cut-1")
            )
        assert err.value.reason == "v3_cutover"
        assert "D14N" in err.value.message
    status = await daemon.status()
    assert status.network_state == pb.NETWORK_STATE_V3_CUTOVER
    assert any("D14N" in w for w in status.warnings)
    (waiting,) = status.outbox  # the payload is kept, retried rarely
    assert waiting.key == "cut-1" and waiting.state == "failing"
    await daemon.client.call("Sync", pb.SyncRequest())  # reads keep working

    async def streams_refused_again() -> bool:
        s = await daemon.status()
        # consent is local; "accepted" holds subscriptions only for conversations
        # allowed since "messages" subscribed: none here (the DM cone made is on
        # "messages" from the start), so nothing of it can be refused.
        network = [st for st in s.streams if st.name not in ("consent", "accepted")]
        return all(not st.connected and st.restarts >= 3 for st in network)

    await until(streams_refused_again)  # each reopening meets the refusal
    assert daemon.stderr().count("has cut over to XMTP's decentralized network") == 1

    # A daemon started after the cutover knows it before anything is sent.
    assert await daemon.stop() == 0
    await daemon.start()

    async def cut_over() -> bool:
        return (await daemon.status()).network_state == pb.NETWORK_STATE_V3_CUTOVER

    await until(cut_over, timeout=30)

    devnet_node.faults.set_v3_cutover(False)  # e.g. the operator pointed cone elsewhere
    sent = await daemon.client.call(
        "Send", pb.SendRequest(to="alice", text="after the cutover", key="cut-1")
    )
    assert sent.published and sent.deduplicated
    assert (await daemon.status()).network_state == pb.NETWORK_STATE_REACHABLE
