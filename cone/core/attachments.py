"""Remote attachments: download once, check, decrypt, keep in the encrypted store.

XMTP's remote attachment codec (`xmtp.org/remoteStaticAttachment`) puts a file's
`xmtp.org/attachment` envelope, encrypted, at a URL: the message carries the URL, the
SHA-256 of the encrypted payload and the key material. cone fetches it with a plain
HTTP(S) GET, bounded in size (`limits.REMOTE_ATTACHMENT_MAX_BYTES`) and time
(`DOWNLOAD_TIMEOUT_S`), checks the digest, derives the key with HKDF-SHA256 (the
32-byte secret, the message's salt, no info) and opens the payload with AES-256-GCM
(its nonce, no associated data). The file then lives in cone's store like an inline
one. A failure is recorded on the attachment (`error`, shown on the message) and
retried with backoff, from 2 s doubling to an hour; it is never dropped.

A URL comes from a peer, so by default only `https://` URLs whose host resolves to
public addresses are fetched: a peer cannot make cone read this machine's or its
network's private services. `CONE_ATTACHMENT_ALLOW_LOCAL=1` lifts that (plain
`http://`, loopback and private addresses) for tests and local networks.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import logging
import os
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from cone import limits
from cone.core import content
from cone.store import Store, attachments
from cone.store.attachments import ToFetch

log = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT_S: Final = 60.0
RETRY_START_S: Final = 2.0
RETRY_MAX_S: Final = 3600.0
# Downloads at once: a peer sending many slow URLs holds at most this many.
PARALLEL: Final = 2
_CHUNK = 64 * 1024


class DownloadError(Exception):
    """Why a remote attachment could not be had this time (shown on the message)."""


def allow_local() -> bool:
    """Whether plain HTTP and private addresses may be fetched."""
    return os.environ.get("CONE_ATTACHMENT_ALLOW_LOCAL", "") not in ("", "0")


def timeout_s() -> float:
    """The bound on one download, `CONE_ATTACHMENT_TIMEOUT_S` or 60 s."""
    raw = os.environ.get("CONE_ATTACHMENT_TIMEOUT_S", "")
    try:
        value = float(raw)
    except ValueError:
        return DOWNLOAD_TIMEOUT_S
    return value if value > 0 else DOWNLOAD_TIMEOUT_S


def check_url(url: str, *, local: bool) -> None:
    """Refuse a URL cone must not fetch for a peer (DownloadError says why)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in (("https", "http") if local else ("https",)):
        raise DownloadError(
            f"refused: only https:// URLs are fetched, not {parts.scheme or url[:40]}"
        )
    if not parts.hostname:
        raise DownloadError("refused: the URL names no host")
    if local:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise DownloadError(f"cannot resolve {parts.hostname}: {exc}") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise DownloadError(f"refused: {parts.hostname} resolves to a non-public address")


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to a URL cone would fetch in the first place."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        check_url(newurl, local=allow_local())
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _get(url: str, limit: int, deadline: float) -> bytes:
    """The body of a GET, at most `limit` bytes, before `deadline` (monotonic)."""
    request = urllib.request.Request(url, headers={"User-Agent": "cone"})
    opener = urllib.request.build_opener(_CheckedRedirects)
    try:
        with opener.open(request, timeout=max(1.0, deadline - time.monotonic())) as r:
            declared = r.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > limit:
                raise DownloadError(f"the file is {declared} bytes, over the {limit}-byte limit")
            body = bytearray()
            while chunk := r.read1(_CHUNK):
                body += chunk
                if len(body) > limit:
                    raise DownloadError(f"the file is over the {limit}-byte limit")
                if time.monotonic() > deadline:
                    raise TimeoutError
            return bytes(body)
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"HTTP {exc.code} from the server") from None
    except TimeoutError:
        raise DownloadError("the download did not finish in time") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DownloadError(f"the download failed: {exc}") from None


def open_payload(ref: dict[str, Any], payload: bytes) -> content.AttachmentPart:
    """Check and decrypt a downloaded payload into its file."""
    if hashlib.sha256(payload).hexdigest() != ref["contentDigest"]:
        raise DownloadError("the downloaded file does not match the message's digest")
    key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=bytes.fromhex(ref["salt"]), info=b""
    ).derive(bytes.fromhex(ref["secret"]))
    try:
        plain = AESGCM(key).decrypt(bytes.fromhex(ref["nonce"]), payload, None)
    except InvalidTag:
        raise DownloadError("the downloaded file does not decrypt with the message's key") from None
    try:
        return content.attachment_of(plain, limits.REMOTE_ATTACHMENT_MAX_BYTES)
    except content.Unreadable as exc:
        raise DownloadError(str(exc)) from None


def download(ref: dict[str, Any]) -> content.AttachmentPart:
    """Fetch, check and decrypt one remote attachment (blocking: run it in a thread)."""
    deadline = time.monotonic() + timeout_s()
    check_url(ref["url"], local=allow_local())
    payload = _get(ref["url"], limits.REMOTE_ATTACHMENT_MAX_BYTES, deadline)
    return open_payload(ref, payload)


def _backoff_ns(attempts: int) -> int:
    delay = min(RETRY_START_S * 2 ** max(0, attempts), RETRY_MAX_S)
    return time.time_ns() + int(delay * (0.75 + random.random() / 2) * 1e9)


class Fetcher:
    """Downloads remote attachments that are due, in the background."""

    def __init__(self, store: Store, on_fetched: Any) -> None:
        self._store = store
        self._on_fetched = on_fetched
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(PARALLEL)

    def start(self) -> None:
        """Start downloading (what is due now, then as it becomes due)."""
        self._task = asyncio.create_task(self._run(), name="attachments")

    async def stop(self) -> None:
        """Stop; downloads that were under way are tried again at the next start."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        """New messages may carry remote attachments."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                due = await self._store.read(attachments.due, time.time_ns())
                await asyncio.gather(*(self._one(item) for item in due))
                next_ns = await self._store.read(attachments.next_due_ns)
            except Exception:  # the worker's boundary: a failed round must not end it
                log.exception("attachment downloads failed; trying again shortly")
                next_ns = time.time_ns() + int(RETRY_START_S * 1e9)
            if due and next_ns is not None and next_ns <= time.time_ns():
                continue
            wait = None if next_ns is None else max(0.0, (next_ns - time.time_ns()) / 1e9)
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except TimeoutError:
                pass

    async def _one(self, item: ToFetch) -> None:
        ref = json.loads(item.remote_json)
        async with self._slots:
            try:
                part = await asyncio.to_thread(download, ref)
            except DownloadError as exc:
                error = str(exc)
            except Exception as exc:  # a peer's file must never stop the worker
                error = f"{type(exc).__name__}: {exc}"
            else:
                assert part.data is not None
                await self._store.write(
                    attachments.fetched,
                    item.message_id,
                    item.index,
                    part.data,
                    part.filename,
                    part.mime_type,
                )
                self._on_fetched()
                return
        log.info("remote attachment of %s: %s (retrying)", item.message_id, error)
        await self._store.write(
            attachments.failed, item.message_id, item.index, error, _backoff_ns(item.attempts)
        )
        self._on_fetched()
