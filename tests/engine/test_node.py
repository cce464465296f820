"""The node probe (cone/engine/_node.py) against the devnet: it tells a node that knows
the identity from one that does not, from one that does not answer in time, and from
one that answers but does not serve the backend's reads; on V3 (the node at the API
URL) and on D14N (the node the gateway names, asked what libxmtp asks it)."""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import grpc.aio

from cone.devnet import Devnet
from cone.engine._node import NodeProbe, NodeView
from support.peers import Peer

QUERY_ENVELOPES = "/xmtp.xmtpv4.message_api.ReplicationApi/QueryEnvelopes"
GET_NEWEST = "/xmtp.xmtpv4.message_api.ReplicationApi/GetNewestEnvelope"
GET_NODES = "/xmtp.xmtpv4.payer_api.PayerApi/GetNodes"


def _calls(node: Devnet) -> dict[str, int]:
    return {method: totals.calls for method, totals in node.stats.methods.items()}


async def test_the_probe_tells_known_unknown_and_silent_nodes_apart(
    devnet_node: Devnet, alice: Peer
) -> None:
    installation = bytes(alice.client.installation_id()).hex()
    known = NodeProbe(devnet_node.url, alice.inbox_id, installation)
    no_inbox = NodeProbe(devnet_node.url, os.urandom(32).hex(), installation)
    no_installation = NodeProbe(devnet_node.url, alice.inbox_id, os.urandom(32).hex())
    try:
        assert (await known.ask(5)).view is NodeView.KNOWS_IDENTITY
        answer = await no_inbox.ask(5)
        assert answer.view is NodeView.IDENTITY_UNKNOWN
        assert "no identity updates for inbox" in answer.detail
        answer = await no_installation.ask(5)
        assert answer.view is NodeView.IDENTITY_UNKNOWN
        assert "no key package for installation" in answer.detail

        devnet_node.faults.set_latency("FetchKeyPackages", 2)
        answer = await known.ask(0.5)
        assert (answer.view, answer.detail) == (
            NodeView.NO_ANSWER,
            "the node did not answer within 0.5 s",
        )
        devnet_node.faults.clear()

        # An answer saying the API is not served there is no answer for this client.
        devnet_node.faults.fail_next("GetIdentityUpdates", 1, grpc.StatusCode.UNIMPLEMENTED)
        answer = await known.ask(5)
        assert answer.view is NodeView.NO_ANSWER
        assert answer.detail.startswith("the node does not serve this API")

        await devnet_node.stop()
        answer = await known.ask(5)
        assert answer.view is NodeView.NO_ANSWER and "does not answer" in answer.detail
    finally:
        for probe in (known, no_inbox, no_installation):
            await probe.close()


async def test_on_d14n_the_probe_asks_the_node_the_gateway_names_with_d14n_reads(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    bob = await Peer.create(url, tmp_path, "bob", d14n=True)
    installation = bytes(bob.client.installation_id()).hex()
    known = NodeProbe(url, bob.inbox_id, installation, gateway_url=url)
    no_inbox = NodeProbe(url, os.urandom(32).hex(), installation, gateway_url=url)
    no_installation = NodeProbe(url, bob.inbox_id, os.urandom(32).hex(), gateway_url=url)
    try:
        answer = await known.ask(5)
        assert (answer.view, answer.detail) == (
            NodeView.KNOWS_IDENTITY,
            f"node 100 at {url} answers and knows this identity",
        )
        answer = await no_inbox.ask(5)
        assert answer.view is NodeView.IDENTITY_UNKNOWN
        assert answer.detail.startswith(f"node 100 at {url} holds no identity updates for inbox")
        answer = await no_installation.ask(5)
        assert answer.view is NodeView.IDENTITY_UNKNOWN
        assert "holds no key package for installation" in answer.detail

        # The reads are the D14N ones: the probe makes no V3 call.
        before = _calls(devnet_node)
        assert (await known.ask(5)).view is NodeView.KNOWS_IDENTITY
        after = _calls(devnet_node)
        asked = {m for m in after if after[m] > before.get(m, 0)}
        assert {QUERY_ENVELOPES, GET_NEWEST, GET_NODES} <= asked
        assert not any(m.startswith(("/xmtp.identity.", "/xmtp.mls.")) for m in asked)
        # ... and a node that answers them UNIMPLEMENTED (a V3-only node where the
        # gateway points) is not reachable for this client.
        devnet_node.faults.fail_next(QUERY_ENVELOPES, 1, grpc.StatusCode.UNIMPLEMENTED)
        answer = await known.ask(5)
        assert answer.view is NodeView.NO_ANSWER
        assert answer.detail.startswith(f"node 100 at {url} does not serve this API")
        assert (await known.ask(5)).view is NodeView.KNOWS_IDENTITY  # chosen again

        # The gateway is asked for its nodes at every probe: one that does not answer
        # (or refuses this client) makes the network unreachable.
        devnet_node.faults.fail_next(GET_NODES, 1)
        answer = await known.ask(5)
        assert answer.view is NodeView.NO_ANSWER
        assert answer.detail.startswith(f"the gateway at {url} does not answer")
        devnet_node.faults.fail_next(GET_NODES, 1, grpc.StatusCode.UNAUTHENTICATED)
        answer = await known.ask(5)
        assert answer.view is NodeView.NO_ANSWER
        assert "refuses this client (UNAUTHENTICATED" in answer.detail
        assert "cone sends no authorization" in answer.detail

        devnet_node.faults.set_latency(QUERY_ENVELOPES, 2)
        answer = await known.ask(0.5)
        assert (answer.view, answer.detail) == (
            NodeView.NO_ANSWER,
            f"node 100 at {url} did not answer within 0.5 s",
        )
        devnet_node.faults.clear()

        await devnet_node.stop()
        answer = await known.ask(5)
        assert answer.view is NodeView.NO_ANSWER
        assert answer.detail.startswith(f"the gateway at {url} does not answer")
    finally:
        for probe in (known, no_inbox, no_installation):
            await probe.close()


async def test_a_server_that_serves_no_xmtp_api_is_unreachable_on_both_backends() -> None:
    # Something answers on the port, but no XMTP API: before, any answer counted.
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    url = f"http://127.0.0.1:{port}"
    probes = [
        NodeProbe(url, os.urandom(32).hex(), os.urandom(32).hex()),
        NodeProbe(url, os.urandom(32).hex(), os.urandom(32).hex(), gateway_url=url),
    ]
    try:
        v3, d14n = [await probe.ask(5) for probe in probes]
        assert v3.view is NodeView.NO_ANSWER
        assert v3.detail.startswith("the node does not serve this API")
        assert d14n.view is NodeView.NO_ANSWER
        assert d14n.detail.startswith(f"the gateway at {url} does not serve this API")
    finally:
        for probe in probes:
            await probe.close()
        await server.stop(None)
