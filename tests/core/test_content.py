"""XMTP content both ways against the official Node SDK (tests/node, pinned): the SDK
decodes what cone sends natively (not its fallback), and cone hands the agent what the
SDK sends in the documented JSON shape, attachment bytes identical."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from facades._serve import RpcError, ServeProcess

from cone.errors import Conflict, InvalidArgument, NotFound
from cone.schema import message_to_json, methods
from conepb.v1 import cone_pb2 as pb
from support.daemons import BACKENDS, DaemonProcess
from support.node_peer import NodePeer
from support.shared import *  # noqa: F403 (the fixtures that share a devnet and daemons)
from support.waiting import accept_request, receive_n, until

# One devnet and one daemon per backend for the module (tests/support/shared.py): what
# a test leaves pending is acknowledged after it, and its keys are its own.
pytestmark = [pytest.mark.timeout(180), pytest.mark.asyncio(loop_scope="module")]


async def _send(daemon: DaemonProcess, params: dict[str, Any]) -> pb.SendResponse:
    """A send with JSON-RPC's parameters, through the shared schema (as every facade)."""
    request = methods()["send"].to_request(params)
    return await daemon.client.call("Send", request)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_the_node_sdk_decodes_cones_markdown_reaction_and_attachment_natively(
    daemon: DaemonProcess, devnet: str, tmp_path: Path
) -> None:
    photo = os.urandom(200_000)
    async with NodePeer.start(devnet, tmp_path) as sdk:
        hello = await _send(daemon, {"to": sdk.inbox_id, "text": "hello", "key": "t"})
        cid = hello.conversation_id
        theirs = await sdk.send(cid, "text", "a message to react to")
        await receive_n(daemon.client, 1)  # sending to the SDK accepted the DM
        md = await _send(daemon, {"to": cid, "markdown": "# Report\n\n- **done**", "key": "m"})
        await _send(
            daemon,
            {"to": cid, "reaction": {"messageId": theirs, "emoji": "👍"}, "key": "r"},
        )
        await _send(
            daemon,
            {
                "to": cid,
                "attachment": {
                    "filename": "photo.bin",
                    "mimeType": "image/png",
                    "data": _b64(photo),
                },
                "key": "a",
            },
        )
        await _send(daemon, {"to": cid, "markdown": "*agreed*", "replyTo": theirs, "key": "reply"})
        reply = methods()["reply"].to_request(
            {
                "conversationId": cid,
                "reaction": {"messageId": md.message_id, "emoji": "🎉"},
                "key": "rr",
            }
        )
        await daemon.client.call("Reply", reply)

        async def seen() -> list[dict[str, Any]]:
            got = await sdk.messages(cid)
            mine = [m for m in got if m["senderInboxId"] != sdk.inbox_id]
            return got if len(mine) >= 5 else []

        got = await until(seen)
        by_type = {m["contentType"]: m for m in got if m["senderInboxId"] != sdk.inbox_id}
        markdown = next(m for m in got if m["id"] == md.message_id)
        assert markdown["contentType"] == "xmtp.org/markdown:1.0"
        assert markdown["content"] == "# Report\n\n- **done**"
        # node-sdk 5 folds reactions into the message they react to, decoded.
        reacted = next(m for m in got if m["id"] == theirs)
        assert [
            (r["content"], r["action"], r["schema"], r["reference"]) for r in reacted["reactions"]
        ] == [("👍", 1, 1, theirs)]
        assert reacted["reactions"][0]["referenceInboxId"] == sdk.inbox_id
        assert [r["content"] for r in markdown["reactions"]] == ["🎉"]
        attachment = by_type["xmtp.org/attachment:1.0"]["content"]
        assert (attachment["filename"], attachment["mimeType"]) == ("photo.bin", "image/png")
        sent = base64.b64decode(attachment["content"]["base64"])
        assert hashlib.sha256(sent).hexdigest() == hashlib.sha256(photo).hexdigest()
        replied = by_type["xmtp.org/reply:1.0"]["content"]
        assert (replied["referenceId"], replied["content"]) == (theirs, "*agreed*")
        assert replied["contentType"]["typeId"] == "markdown"
        assert replied["inReplyTo"]["content"] == "a message to react to"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_cone_hands_the_agent_the_sdks_content_in_the_documented_shape(
    daemon: DaemonProcess, devnet: str, tmp_path: Path, backend: str
) -> None:
    doc = b"%PDF-1.7 " + os.urandom(50_000)
    ident = await daemon.client.identity()
    async with NodePeer.start(devnet, tmp_path, d14n=backend == "d14n") as sdk:
        cid = await sdk.dm(ident.inbox_id)
        first = await sdk.send(cid, "text", "hello")
        await sdk.send(cid, "markdown", "# Title")
        await sdk.send(
            cid,
            "reaction",
            {
                "reference": first,
                "referenceInboxId": sdk.inbox_id,
                "action": 1,
                "content": "❤️",
                "schema": 1,
            },
        )
        await sdk.send(
            cid,
            "reaction",
            {
                "reference": first,
                "referenceInboxId": sdk.inbox_id,
                "action": 2,
                "content": ":heart:",
                "schema": 2,
            },
        )
        await sdk.send(
            cid,
            "attachment",
            {"filename": "doc.pdf", "mimeType": "application/pdf", "content": _b64(doc)},
        )
        tx = {"namespace": "eip155", "networkId": "8453", "reference": "0xabc123"}
        await sdk.send(cid, "transactionReference", tx)
        calls = {
            "version": "1.0",
            "chainId": "0x2105",
            "from": "0x1111111111111111111111111111111111111111",
            "calls": [{"to": "0x2222222222222222222222222222222222222222", "value": "0x1"}],
        }
        await sdk.send(cid, "walletSendCalls", calls)
        actions = {
            "id": "menu",
            "description": "Pick one",
            "actions": [{"id": "yes", "label": "Yes"}],
        }
        await sdk.send(cid, "actions", actions)
        await sdk.send(cid, "intent", {"id": "menu", "actionId": "yes"})
        await accept_request(daemon.client, cid)
        batch = await receive_n(daemon.client, 9)
        as_json = message_to_json(pb.ReceiveResponse(messages=batch, more=False))["messages"]
        m = {i: msg for i, msg in enumerate(as_json)}

    assert m[0]["text"] == "hello" and m[0]["contentType"] == "xmtp.org/text:1.0"
    assert (m[1]["text"], m[1]["contentType"]) == ("# Title", "xmtp.org/markdown:1.0")
    assert m[2]["contentType"] == "xmtp.org/reaction:2.0"
    assert m[2]["reaction"] == {
        "messageId": first,
        "emoji": "❤️",
        "action": "added",
        "schema": "unicode",
        "referenceInboxId": sdk.inbox_id,
    }
    assert m[2]["fallback"].startswith("Reacted with")
    assert m[3]["reaction"] == {
        "messageId": first,
        "emoji": ":heart:",
        "action": "removed",
        "schema": "shortcode",
        "referenceInboxId": sdk.inbox_id,
    }
    att = m[4]["attachment"]
    assert att["filename"] == "doc.pdf" and att["mimeType"] == "application/pdf"
    assert att["size"] == len(doc) and att["sha256"] == hashlib.sha256(doc).hexdigest()
    assert base64.b64decode(att["data"]) == doc
    assert m[4]["fallback"] == "Can't display doc.pdf. This app doesn't support attachments."
    assert (m[5]["contentType"], m[5]["content"]) == ("xmtp.org/transactionReference:1.0", tx)
    assert m[6]["contentType"] == "xmtp.org/walletSendCalls:1.0" and m[6]["content"] == calls
    assert m[7]["contentType"] == "coinbase.com/actions:1.0" and m[7]["content"] == actions
    assert m[8]["contentType"] == "coinbase.com/intent:1.0"
    assert m[8]["content"] == {"id": "menu", "actionId": "yes"}
    for msg in as_json[2:]:
        assert "text" not in msg and "unreadable" not in msg


async def test_an_attachment_over_the_inline_limit_is_refused_naming_it(
    daemon: DaemonProcess, devnet: str, tmp_path: Path
) -> None:
    too_big = {
        "filename": "big.bin",
        "mimeType": "application/octet-stream",
        "data": _b64(bytes(1_000_001)),
    }
    with pytest.raises(InvalidArgument) as err:
        await _send(daemon, {"to": "ab" * 32, "attachment": too_big, "key": "big"})
    assert err.value.field == "attachment.data" and "1000000" in err.value.message
    # The core checks it too, for gRPC clients that bypass the schema.
    request = pb.SendRequest(
        to="ab" * 32,
        key="big",
        attachment=pb.OutgoingAttachment(filename="b", mime_type="a/b", data=bytes(1_000_001)),
    )
    with pytest.raises(InvalidArgument) as core_err:
        await daemon.client.call("Send", request)
    assert core_err.value.field == "attachment.data" and "1000000" in core_err.value.message


async def test_large_attachments_come_by_the_attachment_method_over_json_rpc(
    daemon: DaemonProcess, devnet: str, tmp_path: Path
) -> None:
    big = os.urandom(600_000)  # over the 256 KiB a file may take inline
    smalls = [os.urandom(200_000) for _ in range(6)]  # together over the 1 MiB budget
    ident = await daemon.client.identity()
    async with NodePeer.start(devnet, tmp_path) as sdk:
        cid = await sdk.dm(ident.inbox_id)
        await sdk.send(
            cid,
            "attachment",
            {"filename": "big.bin", "mimeType": "application/octet-stream", "content": _b64(big)},
        )
        for i, data in enumerate(smalls):
            await sdk.send(
                cid,
                "attachment",
                {"filename": f"s{i}", "mimeType": "image/jpeg", "content": _b64(data)},
            )
        await accept_request(daemon.client, cid)
        await receive_n(daemon.client, 7)
    async with ServeProcess(daemon.home, devnet) as serve:
        batch = (await serve.call("receive", {"limit": 10}))["messages"]
        files = [m["attachment"] for m in batch]
        assert "data" not in files[0]
        assert (files[0]["size"], files[0]["sha256"]) == (len(big), _sha(big))
        inline = [f for f in files[1:] if "data" in f]
        assert len(inline) == 5  # 5 × 200,000 bytes fit in 1 MiB, the sixth does not
        assert all(base64.b64decode(f["data"]) == d for f, d in zip(inline, smalls, strict=False))
        for m in (batch[0], batch[6]):
            got = await serve.call("attachment", {"messageId": m["messageId"]})
            data = base64.b64decode(got["data"])
            assert (got["size"], got["sha256"], _sha(data)) == (
                len(data),
                m["attachment"]["sha256"],
                m["attachment"]["sha256"],
            )
            assert (got["filename"], got["mimeType"]) == (
                m["attachment"]["filename"],
                m["attachment"]["mimeType"],
            )
        assert (
            base64.b64decode(
                (await serve.call("attachment", {"messageId": batch[0]["messageId"]}))["data"]
            )
            == big
        )
        with pytest.raises(RpcError) as err:
            await serve.call("attachment", {"messageId": batch[0]["messageId"], "index": 1})
        assert err.value.data["reason"] == "unknown_message"
        with pytest.raises(RpcError) as err:
            await serve.call("attachment", {"messageId": "ab" * 32})
        assert err.value.data["reason"] == "unknown_message"


async def test_a_requests_attachment_is_not_served_until_accepted(
    daemon: DaemonProcess, devnet: str, tmp_path: Path
) -> None:
    ident = await daemon.client.identity()
    async with NodePeer.start(devnet, tmp_path) as sdk:
        cid = await sdk.dm(ident.inbox_id)
        sent = await sdk.send(
            cid,
            "attachment",
            {"filename": "x", "mimeType": "text/plain", "content": _b64(b"secret")},
        )

        async def held() -> bool:
            await daemon.client.call("Sync", pb.SyncRequest())
            requests = await daemon.client.call("Requests", pb.RequestsRequest())
            return any(r.conversation_id == cid and r.pending_messages for r in requests.requests)

        await until(held)
        request = pb.AttachmentRequest(message_id=sent)
        with pytest.raises(NotFound):
            await daemon.client.call("Attachment", request)
        await accept_request(daemon.client, cid)
        got = await daemon.client.call("Attachment", request)
        assert got.data == b"secret" and got.sha256 == _sha(b"secret")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_key_stays_bound_to_its_content_kind_and_reply_to_to_text_kinds(
    daemon: DaemonProcess, devnet: str, tmp_path: Path, backend: str
) -> None:
    async with NodePeer.start(devnet, tmp_path, d14n=backend == "d14n") as sdk:
        first = await _send(daemon, {"to": sdk.inbox_id, "markdown": "*one*", "key": "bound-k"})
        again = await _send(
            daemon, {"to": sdk.inbox_id, "markdown": "*regenerated*", "key": "bound-k"}
        )
        assert (again.message_id, again.deduplicated) == (first.message_id, True)
        with pytest.raises(Conflict) as conflict:
            await _send(daemon, {"to": sdk.inbox_id, "text": "one", "key": "bound-k"})
        assert conflict.value.reason == "key_conflict"
        reaction = {"messageId": first.message_id, "emoji": "👍"}
        with pytest.raises(InvalidArgument) as bad:
            params = {"to": sdk.inbox_id, "reaction": reaction, "replyTo": first.message_id}
            await _send(daemon, {**params, "key": "bound-r"})
        assert bad.value.field == "replyTo"
        with pytest.raises(InvalidArgument) as two:
            await _send(
                daemon, {"to": sdk.inbox_id, "text": "a", "markdown": "b", "key": "bound-x"}
            )
        assert two.value.field == "text"
