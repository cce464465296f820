"""A V3 identity restarted on D14N after the cutover (by hand: `--gateway-url`) carries
on over the same databases: its pending send is published once, nothing it had is
delivered again, and it talks with V3 and D14N peers.

The daemon runs as on a network with no known gateway (`dev`, its URL overridden to
the devnet), so it does not move by itself (tests/core/test_cutover.py covers that)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import Devnet
from cone.errors import FailedPrecondition
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import receive_n, until


async def test_a_v3_identity_restarted_on_d14n_after_the_cutover_loses_and_repeats_nothing(
    home: Path, devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    alice = await Peer.create(url, tmp_path, "alice")  # stays a V3 client
    async with DaemonProcess(home, url, extra_env={"CONE_NETWORK": "dev"}) as daemon:
        contact = (
            await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address, name="alice"))
        ).contact
        await alice.sync()
        dm = alice.conversation(bytes.fromhex(contact.conversation_id))
        await alice.send(dm, "before the cutover")
        (before,) = await receive_n(daemon.client, 1)
        await daemon.client.call("Ack", pb.AckRequest(message_ids=[before.message_id]))
        settled = await daemon.client.call(
            "Send", pb.SendRequest(to="alice", text="sent on V3", key="v3-1")
        )
        devnet_node.faults.set_v3_cutover(True)
        with pytest.raises(FailedPrecondition) as refused:
            await daemon.client.call(
                "Send", pb.SendRequest(to="alice", text="held by the cutover", key="held")
            )
        assert refused.value.reason == "v3_cutover"
        assert await daemon.stop() == 0

        daemon.gateway_url = url  # the devnet's URL is its gateway
        await daemon.start()
        assert (await daemon.client.identity()).backend == "d14n"

        # The held key waits out its backoff (5 minutes after a cutover refusal); the
        # agent's retry with the same key publishes it now, on D14N.
        held = await daemon.client.call(
            "Send", pb.SendRequest(to="alice", text="held, regenerated", key="held")
        )
        assert held.published and held.deduplicated
        assert not (await daemon.client.call("Status", pb.StatusRequest())).outbox
        again = await daemon.client.call(
            "Send", pb.SendRequest(to="alice", text="regenerated", key="v3-1")
        )
        assert (again.message_id, again.deduplicated) == (settled.message_id, True)
        last = await daemon.client.call(
            "Send", pb.SendRequest(to="alice", text="on D14N", key="d14n-1")
        )

        async def alice_has_all() -> list[str]:
            got = await alice.received(bytes.fromhex(contact.conversation_id))
            if not any(bytes(m.id).hex() == last.message_id for m in got):
                return []
            return [ffi.decode_text(m.content) for m in got]

        # A V3 client still reads after the cutover: each message exactly once.
        assert await until(alice_has_all) == ["sent on V3", "held by the cutover", "on D14N"]

        bob = await Peer.create(url, tmp_path, "bob", d14n=True)
        with_bob = (await daemon.client.call("Connect", pb.ConnectRequest(to=bob.address))).contact
        await bob.sync()
        await bob.send(bob.conversation(bytes.fromhex(with_bob.conversation_id)), "from D14N")
        (msg,) = await receive_n(daemon.client, 1)  # nothing from before comes again
        assert (msg.text, msg.sender_inbox_id) == ("from D14N", bob.inbox_id)
