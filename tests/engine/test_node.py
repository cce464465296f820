"""The node probe (cone/engine/_node.py) against the devnet: it tells a node that knows
the identity from one that does not, and from one that does not answer in time."""

from __future__ import annotations

import os

from cone.devnet import Devnet
from cone.engine._node import NodeProbe, NodeView
from support.peers import Peer


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

        await devnet_node.stop()
        answer = await known.ask(5)
        assert answer.view is NodeView.NO_ANSWER and "does not answer" in answer.detail
    finally:
        for probe in (known, no_inbox, no_installation):
            await probe.close()
