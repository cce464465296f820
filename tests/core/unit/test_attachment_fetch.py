"""The core's side of a remote attachment on the fetching role's fake: the envelope the
engine hands back becomes the file, and anything else is the download's error (shown on
the message, retried). The download itself is the engine's (tests/core/
test_attachment_pinning.py, test_remote_attachments.py)."""

from __future__ import annotations

import pytest

from cone.core.attachments import fetch
from cone.core.content import AttachmentPart
from cone.core.content._encoding import _inner_attachment
from cone.engine.roles.attachments import DownloadError, MemoryFetching

URL = "https://files.invalid/1"


async def test_the_fetched_envelope_is_the_file() -> None:
    files = MemoryFetching()
    part = AttachmentPart("notes.txt", "text/plain", b"hello")
    files.files[URL] = _inner_attachment(part).SerializeToString()
    got = await fetch(files, {"url": URL})
    assert (got.filename, got.mime_type, got.data) == ("notes.txt", "text/plain", b"hello")


async def test_bytes_that_are_no_attachment_envelope_are_a_download_error() -> None:
    files = MemoryFetching()
    files.files[URL] = b"\xff not a protobuf"
    with pytest.raises(DownloadError, match="not an XMTP content envelope"):
        await fetch(files, {"url": URL})


async def test_the_engines_refusal_comes_through_as_it_is() -> None:
    files = MemoryFetching()
    files.files[URL] = DownloadError("refused: only https:// URLs are fetched, not http")
    with pytest.raises(DownloadError, match="only https"):
        await fetch(files, {"url": URL})
