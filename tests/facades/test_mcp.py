"""`cone mcp` through the SDK's own client: tools and schemas, every tool against a
devnet identity, isError on bad arguments and core failures, relay, stdin close."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import _v2025_11_25 as v2025_11_25  # the generated spec models
from mcp_types import _v2026_07_28 as v2026_07_28

from cone.daemon.lock import StateLock
from cone.schema import methods, tools
from support.daemons import DaemonProcess
from support.peers import Peer

from ._mcp import mcp_session

EXPECTED_TOOLS = [
    "cone_identity", "cone_connect", "cone_send", "cone_reply", "cone_receive", "cone_ack",
    "cone_requests", "cone_accept", "cone_block", "cone_sync", "cone_status",
    "cone_attachment", "cone_peek",
    "cone_conversations", "cone_messages", "cone_contacts", "cone_unblock",
    "cone_creategroup", "cone_members", "cone_addmembers", "cone_removemembers",
    "cone_leavegroup", "cone_updategroup", "cone_revokeinstallations", "cone_resolve",
]  # fmt: skip


def _ok(result: types.CallToolResult) -> dict[str, Any]:
    """The structured result of a successful call, checked against text and schema."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    (text,) = result.content
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == result.structured_content
    return result.structured_content


def _failed(result: types.CallToolResult) -> str:
    assert result.is_error and result.structured_content is None
    (text,) = result.content
    assert isinstance(text, types.TextContent) and text.text
    return text.text


async def test_the_tool_list_comes_from_the_shared_schema_and_validates(
    home: Path, devnet: str
) -> None:
    async with mcp_session(home, devnet) as session:
        listed = await session.list_tools()
    assert [t.name for t in listed.tools] == EXPECTED_TOOLS
    wire = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
    types.ListToolsResult.model_validate(wire)  # the MCP schema the SDK ships
    # ...and the wire models the SDK generates from the spec's schema files, per revision.
    for revision in (v2025_11_25, v2026_07_28):
        checked = revision.ListToolsResult.model_validate(wire)
        assert [t.name for t in checked.tools] == EXPECTED_TOOLS
    for tool in wire["tools"]:
        method = tools()[tool["name"]]
        assert tool["inputSchema"] == method.params_schema
        assert tool["inputSchema"]["additionalProperties"] is False
        assert tool["outputSchema"] == method.result_schema
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(tool["outputSchema"])
        assert tool["description"] and tool["annotations"]
    descriptions = {t["name"]: t["description"] for t in wire["tools"]}
    assert "ack" in descriptions["cone_receive"] and "key" in descriptions["cone_reply"]
    assert set(tools()) == set(EXPECTED_TOOLS)
    assert set(tools()) | {"cone_requestpreview"} == {m.tool for m in methods().values()}


async def test_every_tool_works_against_a_devnet_identity(
    home: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    async with mcp_session(home, devnet) as session:
        ident = _ok(await session.call_tool("cone_identity", {}))
        assert ident["protocol"] == 1
        contact = _ok(await session.call_tool("cone_connect", {"to": alice.address}))["contact"]
        conversation = contact["conversationId"]
        sent = _ok(
            await session.call_tool("cone_send", {"to": alice.address, "text": "hi", "key": "m1"})
        )
        again = _ok(
            await session.call_tool("cone_send", {"to": alice.address, "text": "hey", "key": "m1"})
        )
        assert again["messageId"] == sent["messageId"] and again["deduplicated"] is True
        await alice.sync()
        await alice.send(alice.conversation(bytes.fromhex(conversation)), "a task for you")
        batch = _ok(await session.call_tool("cone_receive", {"waitMs": 30000}))
        (message,) = batch["messages"]
        assert message["text"] == "a task for you"
        reply = _ok(
            await session.call_tool(
                "cone_reply",
                {
                    "conversationId": conversation,
                    "text": "done",
                    "key": f"reply:{message['messageId']}",
                },
            )
        )
        assert reply["conversationId"] == conversation
        assert _ok(await session.call_tool("cone_ack", {"messageIds": [message["messageId"]]})) == {
            "acknowledged": 1
        }
        assert _ok(await session.call_tool("cone_receive", {}))["messages"] == []

        bob = await Peer.create(devnet, tmp_path, "bob")
        bob_contact = _ok(await session.call_tool("cone_connect", {"to": bob.address}))["contact"]
        assert _ok(await session.call_tool("cone_requests", {})) == {"requests": []}
        accepted = _ok(
            await session.call_tool(
                "cone_accept", {"conversationId": bob_contact["conversationId"]}
            )
        )
        assert accepted == {"accepted": True}
        blocked = _ok(
            await session.call_tool("cone_block", {"conversationId": bob_contact["conversationId"]})
        )
        assert blocked == {"blocked": True}
        assert _ok(await session.call_tool("cone_sync", {})) == {"synced": True}
        assert (
            _ok(await session.call_tool("cone_status", {}))["identity"]["inboxId"]
            == ident["inboxId"]
        )
        assert StateLock(home / "cone.lock").held_by_other()
    assert not StateLock(home / "cone.lock").held_by_other()


async def test_bad_arguments_and_core_failures_are_error_results(home: Path, devnet: str) -> None:
    async with mcp_session(home, devnet) as session:
        assert "limit" in _failed(await session.call_tool("cone_receive", {"limit": 0}))
        assert "colour" in _failed(await session.call_tool("cone_receive", {"colour": "red"}))
        assert "key" in _failed(await session.call_tool("cone_send", {"to": "x", "text": "hi"}))
        assert "text" in _failed(
            await session.call_tool("cone_reply", {"conversationId": "ab", "key": "k"})
        )
        missing = _failed(await session.call_tool("cone_accept", {"conversationId": "ab" * 16}))
        assert "unknown_conversation" in missing
        not_on_xmtp = _failed(await session.call_tool("cone_connect", {"to": "0x" + "12" * 20}))
        assert "not_on_xmtp" in not_on_xmtp
        with pytest.raises(MCPError):
            await session.call_tool("cone_frobnicate", {})
        assert _ok(await session.call_tool("cone_identity", {}))["protocol"] == 1


async def test_mcp_relays_to_a_running_daemon_and_reports_it_gone(home: Path, devnet: str) -> None:
    async with DaemonProcess(home, devnet) as daemon:
        expected = await daemon.client.identity()
        async with mcp_session(home, devnet) as session:
            ident = _ok(await session.call_tool("cone_identity", {}))
            assert ident["inboxId"] == expected.inbox_id
            daemon.kill9()
            gone = _failed(await session.call_tool("cone_identity", {}))
            assert "daemon_unavailable" in gone


async def test_mcp_exits_when_stdin_closes_and_writes_nothing_else(home: Path, devnet: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", "mcp", "--home", str(home), "--api-url", devnet,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}},
    }  # fmt: skip
    proc.stdin.write(json.dumps(initialize).encode() + b"\n")
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.write(
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cone_identity","arguments":{}}}\n'
    )
    await proc.stdin.drain()
    async with asyncio.timeout(60):
        first = json.loads(await proc.stdout.readline())
        second = json.loads(await proc.stdout.readline())
    assert first["id"] == 1 and second["id"] == 2
    assert second["result"]["structuredContent"]["protocol"] == 1
    proc.stdin.close()
    async with asyncio.timeout(20):
        rest = await proc.stdout.read()
        code = await proc.wait()
    assert code == 0 and rest == b""
    assert not StateLock(home / "cone.lock").held_by_other()


def test_the_mcp_doc_lists_every_tool_and_its_config_snippets_parse() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    for name in tools():
        assert f"`{name}`" in doc
    blocks = doc.split("```json\n")[1:]
    assert len(blocks) >= 2
    for block in blocks:
        json.loads(block.split("```", 1)[0])


async def test_a_cancelled_receive_leaves_its_messages_pending(
    home: Path, devnet: str, alice: Peer
) -> None:
    async with mcp_session(home, devnet) as session:
        contact = _ok(await session.call_tool("cone_connect", {"to": alice.address}))["contact"]
        # The client gives up after a second and sends notifications/cancelled.
        with pytest.raises(MCPError):
            await session.call_tool(
                "cone_receive", {"waitMs": 30000, "consumer": "c"}, read_timeout_seconds=1
            )
        await alice.sync()
        await alice.send(alice.conversation(bytes.fromhex(contact["conversationId"])), "kept")
        batch = _ok(await session.call_tool("cone_receive", {"waitMs": 30000, "consumer": "c"}))
        assert [m["text"] for m in batch["messages"]] == ["kept"]
        assert _ok(await session.call_tool("cone_identity", {}))["protocol"] == 1


def test_every_tool_has_its_behaviour_hints() -> None:
    from cone.facades.mcp._tools import _HINTS

    assert set(_HINTS) == {m.rpc for m in tools().values()}
