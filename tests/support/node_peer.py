"""A peer on the official XMTP Node SDK (tests/node/xmtp_peer.mjs), for interop tests.

async with NodePeer.start(devnet_url, tmp_path) as sdk:
    cid = await sdk.dm(cone_inbox_id)
    await sdk.send(cid, "markdown", "# hi")
    messages = await sdk.messages(cid)
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCRIPT = NODE_DIR / "xmtp_peer.mjs"
CALL_S = 60.0
#: The pinned Node SDK 6.1 nightly (libxmtp 1.11), beside 5.5.0 in tests/node.
SDK_NEXT = "xmtp-node-sdk-next"


def sdk_available() -> bool:
    """Whether node and the pinned SDK are installed (npm ci --prefix tests/node)."""
    return shutil.which("node") is not None and (NODE_DIR / "node_modules/@xmtp/node-sdk").exists()


@dataclass
class NodePeer:
    """One Node SDK client in its own process."""

    proc: asyncio.subprocess.Process
    inbox_id: str = ""
    address: str = ""

    @classmethod
    @asynccontextmanager
    async def start(
        cls, api_url: str, directory: Path, *, d14n: bool = False, sdk: str = ""
    ) -> AsyncIterator[NodePeer]:
        """Start the process and create a registered client on `api_url` (with
        `d14n`, in D14N mode with `api_url` as its `gatewayHost`; `sdk` names another
        SDK package than 5.5.0, such as SDK_NEXT)."""
        if not sdk_available():
            pytest.fail("the XMTP Node SDK is not installed: npm ci --prefix tests/node")
        proc = await asyncio.create_subprocess_exec(
            "node", str(SCRIPT), cwd=str(NODE_DIR),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "NODE_NO_WARNINGS": "1", **({"CONE_NODE_SDK": sdk} if sdk else {})},
            limit=64 * 1024 * 1024,
        )  # fmt: skip
        peer = cls(proc)
        try:
            gateway = {"gatewayHost": api_url} if d14n else {}
            db_path = str(directory / "sdk.db3")
            started = await peer.call("start", apiUrl=api_url, dbPath=db_path, **gateway)
            peer.inbox_id, peer.address = started["inboxId"], started["address"]
            yield peer
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()

    async def call(self, cmd: str, **params: Any) -> Any:
        """One command; its result, or AssertionError with the SDK's error."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **params}).encode() + b"\n")
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), CALL_S)
        if not line:
            raise AssertionError(f"the Node SDK peer exited during {cmd}")
        answer = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"Node SDK {cmd} failed: {answer['error']}")
        return answer["ok"]

    async def reopen_on_d14n(self, gateway_url: str) -> None:
        """Replace this peer's client by a new one of the same wallet on the same SDK
        database, in D14N mode through `gateway_url` (node-sdk 5.5 cannot switch a
        running client); the inbox stays the same."""
        reopened = await self.call("reopen", gatewayHost=gateway_url)
        assert reopened["inboxId"] == self.inbox_id

    async def dm(self, inbox_id: str) -> str:
        """The DM with an inbox (created); its conversation id."""
        return str((await self.call("dm", inboxId=inbox_id))["conversationId"])

    async def group(self, *inbox_ids: str) -> str:
        """A new group with these inboxes; its conversation id."""
        return str((await self.call("group", inboxIds=list(inbox_ids)))["conversationId"])

    async def send(self, conversation_id: str, kind: str, content: Any) -> str:
        """Send one message of a kind the SDK knows; its message id."""
        sent = await self.call("send", conversationId=conversation_id, kind=kind, content=content)
        return str(sent["messageId"])

    async def messages(self, conversation_id: str) -> list[dict[str, Any]]:
        """Every message of a conversation as the SDK decodes it (synced first)."""
        found: list[dict[str, Any]] = await self.call("messages", conversationId=conversation_id)
        return found

    async def encrypted(self, filename: str, mime: str, data: bytes) -> dict[str, Any]:
        """The SDK's encryption of a file for a remote attachment: its payload and key
        material as bytes, the rest as the SDK gives it (see `remote_reference`)."""
        enc = await self.call(
            "encrypt", attachment={"filename": filename, "mimeType": mime, "content": _b64(data)}
        )
        return {
            k: base64.b64decode(v["base64"]) if isinstance(v, dict) else v for k, v in enc.items()
        }

    async def add_members(self, conversation_id: str, *inbox_ids: str) -> None:
        """Add inboxes to a group."""
        await self.call("addMembers", conversationId=conversation_id, inboxIds=list(inbox_ids))

    async def remove_members(self, conversation_id: str, *inbox_ids: str) -> None:
        """Remove inboxes from a group."""
        await self.call("removeMembers", conversationId=conversation_id, inboxIds=list(inbox_ids))

    async def stream(self) -> None:
        """Start streaming every message from now on (read with `streamed`)."""
        await self.call("stream")

    async def streamed(self) -> list[str]:
        """The texts from other inboxes the stream has delivered so far."""
        texts: list[str] = await self.call("streamed")
        return texts


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def remote_reference(enc: dict[str, Any], url: str) -> dict[str, Any]:
    """The `remoteAttachment` content pointing at `url` for an `encrypted` file."""
    return {
        "url": url,
        "contentDigest": enc["contentDigest"],
        "secret": _b64(enc["secret"]),
        "salt": _b64(enc["salt"]),
        "nonce": _b64(enc["nonce"]),
        "scheme": "https://",
        "contentLength": len(enc["payload"]),
        "filename": enc["filename"],
    }
