"""/metrics: outbox entries failing, by reason; the reason read from the sentences
cone's own errors carry (the real constructors make them here), and from a real
failing publication on a devnet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cone.core.network import identity_unknown
from cone.devnet import Devnet
from cone.engine._errors import cutover_refusal, translate
from cone.facades.http._routes import OUTBOX_REASONS, outbox_reason
from support.http_daemon import HttpDaemon
from support.peers import Peer
from support.waiting import until


@pytest.mark.parametrize(
    ("sentence", "reason"),
    [
        (cutover_refusal("publishing a message").message, "v3_cutover"),
        (identity_unknown("http://node", "inbox not found").message, "identity_unknown"),
        (translate(RuntimeError("429 rate limit exceeded"), "publishing").message, "rate_limited"),
        (translate(RuntimeError("database or disk is full"), "publishing").message, "storage_full"),
        (
            translate(RuntimeError("connection refused"), "publishing").message,
            "network_unavailable",
        ),
        ("XMTP's write budget (about 3,000 per 5 minutes) is used up", "rate_limited"),
        ("publishing a message stopped: the node forgot this identity", "identity_unknown"),
        (None, "network_unavailable"),
    ],
)
def test_a_failing_entry_is_counted_under_its_errors_reason(
    sentence: str | None, reason: str
) -> None:
    assert outbox_reason(sentence) == reason
    assert reason in OUTBOX_REASONS


@pytest.fixture
async def daemon(home: Path, devnet: str) -> AsyncIterator[HttpDaemon]:
    async with HttpDaemon(home, devnet) as d:
        yield d


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
        for other in OUTBOX_REASONS[:-1]:
            assert f'cone_outbox_failing{{reason="{other}"}} 0.0' in text
        devnet_node.faults.clear()

        async def settled() -> bool:
            return 'cone_outbox_failing{reason="network_unavailable"} 0.0' in await scrape()

        await until(settled, 90)
