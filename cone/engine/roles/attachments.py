"""The attachment fetching role: a remote attachment's file downloaded, checked and
decrypted, and its fake.

XMTP's remote attachment codec (`xmtp.org/remoteStaticAttachment`) puts a file's
`xmtp.org/attachment` envelope, encrypted, at a URL; the message carries the URL, the
SHA-256 of the encrypted payload and the key material (`url`, `contentDigest`,
`salt`, `secret`, `nonce`). `Engine` is the real `AttachmentFetching` (HTTP and
crypto in cone/engine/_download.py, with its policy on what a peer's URL may reach);
`MemoryFetching` hands back what a test put at each URL. The core decodes the
envelope and keeps the file (cone/core/attachments.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol


class DownloadError(Exception):
    """Why a remote attachment could not be had this time (shown on the message)."""


class AttachmentFetching(Protocol):
    """Downloads remote attachments."""

    async def fetch_attachment(self, reference: Mapping[str, Any]) -> bytes:
        """The decrypted envelope a remote attachment's `reference` points to (its
        digest checked); DownloadError says why not."""
        ...


class MemoryFetching:
    """An in-memory `AttachmentFetching`: `files` maps a URL to the envelope found
    there, or to the DownloadError its download meets; a URL not in it is a 404.
    `fetched` lists the URLs asked for, in turn."""

    def __init__(self) -> None:
        self.files: dict[str, bytes | DownloadError] = {}
        self.fetched: list[str] = []

    async def fetch_attachment(self, reference: Mapping[str, Any]) -> bytes:
        url = str(reference["url"])
        self.fetched.append(url)
        found = self.files.get(url, DownloadError("HTTP 404 from the server"))
        if isinstance(found, DownloadError):
            raise found
        return found


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[AttachmentFetching] = MemoryFetching


__all__ = ["AttachmentFetching", "DownloadError", "MemoryFetching"]
