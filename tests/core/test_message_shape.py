"""One message shape: `messages` (history) shows every message exactly as `receive`
hands it out, for every content kind, and a sender's own message as its peer receives
it. The only field that differs is `deliveries` (per consumer: history counts nothing);
an own message's `sequence` and `sentAt` are the sender's (0, and when cone took its
key), and it is marked `own`."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from xmtp_bindings import xmtpv3 as ffi

from cone.core import content
from cone.schema import message_to_json, methods
from conepb.v1 import cone_pb2 as pb
from conepb.xmtpcontent import content_pb2
from support.daemons import DaemonProcess, short_home
from support.files import Files, serve
from support.peers import Peer
from support.waiting import accept_request, until

pytestmark = pytest.mark.timeout(240)

Json = dict[str, Any]


def _type(authority: str, type_id: str) -> content_pb2.ContentTypeId:
    return content_pb2.ContentTypeId(
        authority_id=authority, type_id=type_id, version_major=1, version_minor=0
    )


def _encrypted(filename: str, mime: str, data: bytes) -> tuple[bytes, dict[str, Any]]:
    """A file encrypted as XMTP's remote attachment codec does: (payload, reference)."""
    inner = content_pb2.EncodedContent(
        type=_type("xmtp.org", "attachment"),
        parameters={"filename": filename, "mimeType": mime},
        content=data,
    ).SerializeToString()
    secret, salt, nonce = os.urandom(32), os.urandom(32), os.urandom(12)
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=b"").derive(secret)
    payload = AESGCM(key).encrypt(nonce, inner, None)
    ref = {
        "digest": hashlib.sha256(payload).hexdigest(),
        "secret": secret,
        "salt": salt,
        "nonce": nonce,
        "length": len(payload),
        "filename": filename,
    }
    return payload, ref


def _remote(url: str, ref: dict[str, Any]) -> bytes:
    return content_pb2.EncodedContent(
        type=_type("xmtp.org", "remoteStaticAttachment"),
        parameters={
            "contentDigest": ref["digest"],
            "secret": ref["secret"].hex(),
            "salt": ref["salt"].hex(),
            "nonce": ref["nonce"].hex(),
            "scheme": "https://",
            "contentLength": str(ref["length"]),
            "filename": ref["filename"],
        },
        fallback=f"Can't display {ref['filename']}. This app doesn't support attachments.",
        content=url.encode(),
    ).SerializeToString()


def _multi(refs: list[tuple[str, dict[str, Any]]]) -> bytes:
    multi = content_pb2.MultiRemoteAttachment(
        attachments=[
            content_pb2.RemoteAttachmentInfo(
                url=url,
                content_digest=ref["digest"],
                secret=ref["secret"],
                salt=ref["salt"],
                nonce=ref["nonce"],
                scheme="https://",
                content_length=ref["length"],
                filename=ref["filename"],
            )
            for url, ref in refs
        ]
    )
    return content_pb2.EncodedContent(
        type=_type("xmtp.org", "multiRemoteStaticAttachment"),
        fallback="Can't display these attachments.",
        content=multi.SerializeToString(),
    ).SerializeToString()


@pytest.fixture
async def receiver(home: Path, devnet: str) -> AsyncIterator[DaemonProcess]:
    """The daemon whose `receive` and `messages` are compared (local downloads allowed)."""
    env = {"CONE_ATTACHMENT_ALLOW_LOCAL": "1", "CONE_ATTACHMENT_TIMEOUT_S": "5"}
    async with DaemonProcess(home, devnet, env) as d:
        yield d


@pytest.fixture
async def sender(devnet: str) -> AsyncIterator[DaemonProcess]:
    """A second cone, sending every kind cone sends (its history holds them as own)."""
    async with DaemonProcess(short_home(), devnet) as d:
        yield d


async def _send(daemon: DaemonProcess, params: Json) -> str:
    response = await daemon.client.call("Send", methods()["send"].to_request(params))
    assert response.published
    return str(response.message_id)


async def _history(daemon: DaemonProcess, conversation_id: str) -> dict[str, Json]:
    request = pb.MessagesRequest(conversation_id=conversation_id, limit=100, oldest_first=True)
    page = await daemon.client.call("Messages", request)
    assert not page.more
    return {m["messageId"]: m for m in message_to_json(page)["messages"]}


def _without(message: Json, *fields: str) -> Json:
    return {k: v for k, v in message.items() if k not in fields}


async def test_messages_shows_what_receive_hands_out_for_every_kind(
    receiver: DaemonProcess, sender: DaemonProcess, alice: Peer
) -> None:
    me = await receiver.client.identity()
    photo = os.urandom(3000)

    # Every kind cone sends, from another cone.
    text = await _send(sender, {"to": me.inbox_id, "text": "plain words", "key": "t"})
    cid = (
        (await sender.client.call("Conversations", pb.ConversationsRequest()))
        .conversations[0]
        .conversation_id
    )
    own = [
        text,
        await _send(sender, {"to": cid, "markdown": "# Title\n\n- **done**", "key": "m"}),
        await _send(sender, {"to": cid, "text": "a reply", "replyTo": text, "key": "r"}),
        await _send(
            sender, {"to": cid, "reaction": {"messageId": text, "emoji": "👍"}, "key": "x"}
        ),
        await _send(
            sender,
            {
                "to": cid,
                "attachment": {
                    "filename": "photo.png",
                    "mimeType": "image/png",
                    "data": base64.b64encode(photo).decode(),
                },
                "key": "a",
            },
        ),
        await _send(sender, {"to": cid, "data": {"n": [1, 2.5], "ok": True}, "key": "d"}),
    ]

    # What other apps send: remote and multi remote attachments, a JSON codec type,
    # unreadable bytes, and a message its sender then deletes.
    files = Files()
    with serve(files) as base:
        contact = await receiver.client.call("Connect", pb.ConnectRequest(to=alice.address))
        alice_cid = contact.contact.conversation_id
        await alice.sync()
        dm = alice.conversation(bytes.fromhex(alice_cid))
        one, one_ref = _encrypted("notes.txt", "text/plain", b"some notes")
        two, two_ref = _encrypted("more.bin", "application/octet-stream", os.urandom(500))
        files.bodies["/one"], files.bodies["/two"] = one, two
        opts = ffi.FfiSendMessageOpts(should_push=True)
        for payload in (
            _remote(base + "/one", one_ref),
            _multi([(base + "/one", one_ref), (base + "/two", two_ref)]),
            content_pb2.EncodedContent(
                type=_type("xmtp.org", "transactionReference"),
                content=b'{"namespace":"eip155","networkId":"8453","reference":"0xabc"}',
            ).SerializeToString(),
            b"\xff\x00 not a protobuf \xff",
        ):
            await dm.send(payload, opts)
        doomed = await alice.send(dm, "soon deleted")

        await accept_request(receiver.client, cid)

        async def everything() -> dict[str, Json]:
            batch = await receiver.client.receive(limit=100)
            got = {m["messageId"]: m for m in message_to_json(batch)["messages"]}
            files = [
                f
                for m in got.values()
                for f in [m.get("attachment"), *m.get("attachments", [])]
                if f
            ]
            downloaded = all("data" in f for f in files)
            return got if len(got) == len(own) + 5 and downloaded else {}

        received = await until(everything)

    dm.delete_message(doomed)
    await dm.publish_messages()

    async def deleted() -> dict[str, Json]:
        batch = await receiver.client.receive(limit=100)  # handed out before: shown deleted
        got = {m["messageId"]: m for m in message_to_json(batch)["messages"]}
        return got if got.get(doomed.hex(), {}).get("deleted") else {}

    received = await until(deleted)
    kinds = {m["contentType"] for m in received.values()}
    assert {
        content.TEXT, content.MARKDOWN, content.REPLY, content.REACTION, content.ATTACHMENT,
        content.DATA, "xmtp.org/remoteStaticAttachment:1.0",
        "xmtp.org/multiRemoteStaticAttachment:1.0", "xmtp.org/transactionReference:1.0",
        "unknown",
    } <= kinds  # fmt: skip
    assert any("unreadable" in m for m in received.values())
    assert all(m["deliveries"] >= 2 for m in received.values())

    history = await _history(receiver, cid) | await _history(receiver, alice_cid)
    for message_id, got in received.items():
        assert history[message_id]["deliveries"] == 0  # history hands nothing out
        assert _without(history[message_id], "deliveries") == _without(got, "deliveries"), got[
            "contentType"
        ]

    # The sender's history shows its own messages as the peer received them.
    sent = await _history(sender, cid)
    assert list(sent) == own
    for message_id in own:
        mine, theirs = sent[message_id], received[message_id]
        assert mine["own"] is True and "own" not in theirs
        assert _without(mine, "own", "deliveries", "sequence", "sentAt") == _without(
            theirs, "deliveries", "sequence", "sentAt"
        ), theirs["contentType"]
