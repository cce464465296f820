"""Remote attachments from the official Node SDK, served by a local HTTP server in the
test: a good download, a wrong digest, a timeout, an oversized file and a 404, each
with its documented outcome; failures are visible and retried, never dropped."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cone import limits
from cone.engine._download import check_url
from cone.engine.roles.attachments import DownloadError
from cone.errors import Unavailable
from cone.schema import message_to_json
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.files import Files, serve
from support.node_peer import NodePeer, remote_reference
from support.waiting import accept_request, until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def local_daemon(home: Path, devnet: str) -> AsyncIterator[DaemonProcess]:
    env = {"CONE_ATTACHMENT_ALLOW_LOCAL": "1", "CONE_ATTACHMENT_TIMEOUT_S": "2"}
    async with DaemonProcess(home, devnet, env) as d:
        yield d


async def _messages(daemon: DaemonProcess) -> list[dict[str, Any]]:
    batch = await daemon.client.receive(consumer="", limit=100, wait_ms=0)
    return list(message_to_json(batch)["messages"])


async def test_remote_attachments_download_or_say_why_and_are_retried(
    local_daemon: DaemonProcess, devnet: str, tmp_path: Path
) -> None:
    daemon = local_daemon
    photo, other = b"\x89PNG" + bytes(range(256)) * 300, b"second file"
    movie = os.urandom(3_000_000)  # remote files may be larger than inline ones
    files = Files()
    ident = await daemon.client.identity()
    with serve(files) as base:
        async with NodePeer.start(devnet, tmp_path) as sdk:
            good = await sdk.encrypted("photo.png", "image/png", photo)
            second = await sdk.encrypted("notes.txt", "text/plain", other)
            files.bodies["/good"] = good["payload"]
            files.bodies["/second"] = second["payload"]
            files.bodies["/tampered"] = good["payload"][:-1] + bytes([good["payload"][-1] ^ 1])
            files.bodies["/big"] = bytes(limits.REMOTE_ATTACHMENT_MAX_BYTES + 1)
            cid = await sdk.dm(ident.inbox_id)
            sent = {}
            large = await sdk.encrypted("video.mp4", "video/mp4", movie)
            files.bodies["/large"] = large["payload"]
            for path in ("/good", "/tampered", "/slow", "/big", "/later"):
                sent[path] = await sdk.send(
                    cid, "remoteAttachment", remote_reference(good, base + path)
                )
            large_ref = remote_reference(large, base + "/large")
            sent["/large"] = await sdk.send(cid, "remoteAttachment", large_ref)
            multi = {
                "attachments": [
                    remote_reference(good, base + "/good"),
                    remote_reference(second, base + "/second"),
                ]
            }
            sent["multi"] = await sdk.send(cid, "multiRemoteAttachment", multi)

            async def held() -> bool:
                await daemon.client.call("Sync", pb.SyncRequest())
                requests = await daemon.client.call("Requests", pb.RequestsRequest())
                return any(r.pending_messages == 7 for r in requests.requests)

            # A request's files wait for its acceptance (docs/guarantees.md).
            await until(held)
            assert not files.hits
            await accept_request(daemon.client, cid)

            def by_id(ms: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
                return {m["messageId"]: m for m in ms}

            async def settled() -> dict[str, dict[str, Any]]:
                got = by_id(await _messages(daemon))
                if len(got) < 7:
                    return {}
                first_tries = [
                    got[sent[p]]["attachment"].get("error") != "not downloaded yet"
                    for p in ("/tampered", "/slow", "/big", "/later")
                ]
                done = "data" in got[sent["/good"]]["attachment"]
                done = done and "sha256" in got[sent["/large"]]["attachment"]
                done = done and all("data" in f for f in got[sent["multi"]]["attachments"])
                return got if done and all(first_tries) else {}

            got = await until(settled)
            ok = got[sent["/good"]]
            assert ok["contentType"] == "xmtp.org/remoteStaticAttachment:1.0"
            a = ok["attachment"]
            assert (a["filename"], a["mimeType"], a["size"]) == (
                "photo.png",
                "image/png",
                len(photo),
            )
            assert a["sha256"] == hashlib.sha256(photo).hexdigest() and "error" not in a
            assert base64.b64decode(a["data"]) == photo
            served = await daemon.client.call(
                "Attachment", pb.AttachmentRequest(message_id=sent["/good"])
            )
            assert served.data == photo and served.mime_type == "image/png"

            # Larger than an inline attachment may be: stored, served by the method.
            big_one = got[sent["/large"]]["attachment"]
            assert (big_one["size"], big_one["mimeType"]) == (len(movie), "video/mp4")
            assert "data" not in big_one and "error" not in big_one
            served = await daemon.client.call(
                "Attachment", pb.AttachmentRequest(message_id=sent["/large"])
            )
            assert hashlib.sha256(served.data).digest() == hashlib.sha256(movie).digest()

            errors = {
                p: got[sent[p]]["attachment"]["error"]
                for p in ("/tampered", "/slow", "/big", "/later")
            }
            assert "does not match the message's digest" in errors["/tampered"]
            assert "did not finish in time" in errors["/slow"]
            assert f"over the {limits.REMOTE_ATTACHMENT_MAX_BYTES}-byte limit" in errors["/big"]
            assert "HTTP 404" in errors["/later"]
            for p in errors:
                assert "data" not in got[sent[p]]["attachment"]
                assert got[sent[p]]["fallback"]  # the sender's description stays

            pair = got[sent["multi"]]["attachments"]
            assert [f["filename"] for f in pair] == ["photo.png", "notes.txt"]
            multi_data = [base64.b64decode(f["data"]) for f in pair]
            assert multi_data == [photo, other]
            second_file = await daemon.client.call(
                "Attachment", pb.AttachmentRequest(message_id=sent["multi"], index=1)
            )
            assert second_file.data == other

            # A failure is retried: the file that was missing arrives once it is there.
            files.bodies["/later"] = good["payload"]

            async def healed() -> bool:
                m = by_id(await _messages(daemon))[sent["/later"]]["attachment"]
                return "data" in m and base64.b64decode(m["data"]) == photo

            await until(healed, timeout=30)

            # Each failure keeps its own backoff: the tampered file's second try comes
            # in its own time, before or after the one that healed.
            async def tampered_again() -> bool:
                return files.hits["/tampered"] >= 2

            await until(tampered_again, timeout=30)
            with pytest.raises(Unavailable) as err:
                await daemon.client.call(
                    "Attachment", pb.AttachmentRequest(message_id=sent["/tampered"])
                )
            assert err.value.reason == "attachment_unavailable"
            assert "digest" in err.value.message


def test_only_public_https_urls_are_fetched_for_a_peer() -> None:
    for url, why in [
        ("http://example.com/x", "only https"),
        ("ftp://example.com/x", "only https"),
        ("https://127.0.0.1/x", "non-public"),
        ("https://10.0.0.1/x", "non-public"),
        ("https://[::1]/x", "non-public"),
        ("https://169.254.169.254/latest", "non-public"),
        ("https:///x", "no host"),
    ]:
        with pytest.raises(DownloadError, match=why):
            check_url(url, local=False)
    check_url("http://127.0.0.1:8080/x", local=True)


async def test_remote_attachment_refusals_are_visible(
    daemon: DaemonProcess, devnet: str, tmp_path: Path
) -> None:
    """Without CONE_ATTACHMENT_ALLOW_LOCAL, a loopback URL is refused, not fetched."""
    files = Files()
    ident = await daemon.client.identity()
    with serve(files) as base:
        async with NodePeer.start(devnet, tmp_path) as sdk:
            enc = await sdk.encrypted("a.txt", "text/plain", b"x")
            files.bodies["/a"] = enc["payload"]
            cid = await sdk.dm(ident.inbox_id)
            mid = await sdk.send(
                cid, "remoteAttachment", remote_reference(enc, base.replace("http", "https") + "/a")
            )

            await accept_request(daemon.client, cid)

            async def refused() -> str:
                ms = await _messages(daemon)
                error = ms[0]["attachment"].get("error", "") if ms else ""
                return error if "refused" in error else ""

            assert "non-public" in await until(refused)
            assert files.hits == {}
            ms = await _messages(daemon)
            assert ms[0]["messageId"] == mid and "data" not in ms[0]["attachment"]
