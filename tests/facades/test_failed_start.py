"""`cone serve` and `cone mcp` whose core cannot start answer every request they read."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types

from cone.devnet import Devnet
from support.ports import fresh_port

from ._mcp import mcp_session
from ._serve import ServeProcess


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{fresh_port()}"


async def test_serve_answers_every_request_it_read_with_the_reason_the_core_could_not_start(
    home: Path, devnet_node: Devnet
) -> None:
    # The first start waits on the network (held on purpose) while requests are read.
    devnet_node.faults.set_latency("GetInboxIds", 600)
    async with ServeProcess(home, devnet_node.url) as serve:
        ids = [
            serve.request("identity"),
            serve.request("receive", {"waitMs": 1000}),
            serve.request("send", {"to": "0x" + "12" * 20, "text": "hi", "key": "k"}),
        ]
        # Answered without the core: every line before it has been read.
        probe = await serve.answer_to(serve.request("nosuchmethod"))
        assert probe["error"]["code"] == -32601
        await devnet_node.stop()  # now the start fails: no network
        for id_ in ids:
            error = (await serve.answer_to(id_))["error"]
            assert (error["code"], error["data"]["reason"]) == (-32001, "daemon_unavailable")
            assert error["data"]["cause"] == "network_unavailable"
        assert await serve.close() == 5  # the start failure's exit code


async def test_mcp_answers_every_tool_call_with_the_reason_the_core_could_not_start(
    home: Path,
) -> None:
    async with mcp_session(home, _closed_port_url()) as session:
        for name in ("cone_identity", "cone_sync"):
            result = await session.call_tool(name, {})
            assert result.is_error and result.structured_content is None
            (text,) = result.content
            assert isinstance(text, types.TextContent)
            assert "daemon_unavailable" in text.text and "network_unavailable" in text.text
