"""Issue 15's methods through `cone serve` (JSON-RPC), results checked against their schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema

from cone.schema import methods
from support.peers import Peer
from support.waiting import until

from ._serve import RpcError, ServeProcess


def _valid(method: str, result: Any) -> Any:
    jsonschema.validate(result, methods()[method].result_schema)
    return result


async def test_conversations_history_and_groups_over_jsonrpc(
    home: Path, devnet: str, alice: Peer
) -> None:
    async with ServeProcess(home, devnet) as serve:
        contact = (await serve.call("connect", {"to": alice.address, "name": "alice"}))["contact"]
        await alice.client.conversations().sync()
        dm = alice.conversation(bytes.fromhex(contact["conversationId"]))
        await alice.send(dm, "hello over JSON-RPC")
        await serve.call("send", {"to": "alice", "text": "and back", "key": "k1"})
        group = _valid(
            "createGroup",
            await serve.call("createGroup", {"members": ["alice"], "name": "pair", "key": "g1"}),
        )["group"]
        assert group["conversationType"] == "group" and group["consent"] == "accepted"
        assert group["name"] == "pair" and group["memberCount"] == 2

        listed = _valid(
            "conversations", await serve.call("conversations", {"type": "group", "limit": 10})
        )
        assert [c["conversationId"] for c in listed["conversations"]] == [group["conversationId"]]
        assert "cursor" not in listed
        dms = await serve.call("conversations", {"type": "dm", "consent": "accepted"})
        assert dms["conversations"][0]["contactName"] == "alice"

        async def both() -> Any:
            found = await serve.call(
                "messages", {"conversationId": contact["conversationId"], "oldestFirst": True}
            )
            return found if len(found["messages"]) == 2 else None

        history = _valid("messages", await until(both))
        assert [(m["text"], m.get("own", False)) for m in history["messages"]] == [
            ("hello over JSON-RPC", False),
            ("and back", True),
        ]
        members = _valid(
            "members", await serve.call("members", {"conversationId": group["conversationId"]})
        )
        assert [m["role"] for m in members["members"]] == ["super_admin", "member"]
        updated = _valid(
            "updateGroup",
            await serve.call(
                "updateGroup", {"conversationId": group["conversationId"], "description": "d"}
            ),
        )
        assert updated["group"]["description"] == "d"
        assert _valid("contacts", await serve.call("contacts"))["contacts"][0]["name"] == "alice"
        try:
            await serve.call("unblock", {"conversationId": contact["conversationId"]})
        except RpcError as err:
            assert err.code == -32004 and err.data["reason"] == "not_blocked"
        else:
            raise AssertionError("unblock of an accepted conversation succeeded")
        try:
            await serve.call("revokeInstallations", {})
        except RpcError as err:
            assert err.code == -32602
        else:
            raise AssertionError("revokeInstallations without a choice succeeded")
