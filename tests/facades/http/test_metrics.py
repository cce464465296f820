"""/metrics: outbox entries failing, by the reason code their last failure recorded
(the real error constructors make them here), and from a real failing publication on
a devnet, whose reason status reports as `lastReason`."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from cone.core.network import identity_unknown
from cone.devnet import Devnet
from cone.engine._errors import cutover_refusal, translate
from cone.errors import ConeError, InvalidArgument, RateLimited
from cone.facades.http._routes import OUTBOX_REASONS, outbox_reason
from support.http_daemon import HttpDaemon
from support.peers import Peer
from support.waiting import until


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (cutover_refusal("publishing a message"), "v3_cutover"),
        (identity_unknown("http://node", "inbox not found"), "identity_unknown"),
        (translate(RuntimeError("429 rate limit exceeded"), "publishing"), "rate_limited"),
        (translate(RuntimeError("database or disk is full"), "publishing"), "storage_full"),
        (translate(RuntimeError("connection refused"), "publishing"), "network_unavailable"),
        (RateLimited("XMTP's write budget is used up"), "rate_limited"),
        (InvalidArgument("not a reason an outbox entry carries"), "other"),
    ],
)
def test_a_failing_entry_is_counted_under_its_errors_reason(error: ConeError, reason: str) -> None:
    assert outbox_reason(error.reason) == reason
    assert reason in OUTBOX_REASONS


def test_an_entry_without_a_recorded_reason_counts_as_other() -> None:
    assert outbox_reason(None) == "other"


async def _rpc(
    daemon: HttpDaemon, session: aiohttp.ClientSession, method: str, **params: Any
) -> Any:
    _, answer = await daemon.rpc(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, session
    )
    assert "error" not in answer, answer
    return answer["result"]


async def test_metrics_count_pending_and_failing_sends_by_reason(
    daemon: HttpDaemon, alice: Peer, devnet_node: Devnet
) -> None:
    async with aiohttp.ClientSession() as session:
        dm = (await _rpc(daemon, session, "connect", to=alice.address))["contact"]["conversationId"]
        devnet_node.faults.fail_group(bytes.fromhex(dm), 1000)
        sent = await _rpc(daemon, session, "reply", conversationId=dm, text="held", key="m1")
        assert sent["published"] is False

        async def scrape() -> str:
            async with session.get(daemon.url + "metrics", headers=daemon.auth) as r:
                return await r.text()

        text = await scrape()
        assert 'cone_outbox_messages{state="failing"} 1.0' in text
        assert 'cone_outbox_failing{reason="network_unavailable"} 1.0' in text
        entry = (await _rpc(daemon, session, "status"))["outbox"][0]
        assert entry["lastReason"] == "network_unavailable", entry
        for other in set(OUTBOX_REASONS) - {"network_unavailable"}:
            assert f'cone_outbox_failing{{reason="{other}"}} 0.0' in text
        devnet_node.faults.clear()

        async def settled() -> bool:
            return 'cone_outbox_failing{reason="network_unavailable"} 0.0' in await scrape()

        await until(settled, 90)
