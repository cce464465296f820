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

Only attachments in Receive's view are fetched (an accepted conversation, a sender
not blocked: `store.attachments.due`): a stranger or a blocked peer learns nothing by
sending one; a request's are fetched once it is accepted.

A URL comes from a peer, so by default only `https://` URLs whose host resolves to
public addresses are fetched: a peer cannot make cone read this machine's or its
network's private services. The name is resolved once, its addresses are checked, and
the connection goes to those very addresses (a resolver that answers a public address
first and 127.0.0.1 next gains nothing); TLS is still verified for the URL's name.
Every redirect is checked and pinned the same way. Proxy variables of the environment
(HTTPS_PROXY, ...) are ignored; `CONE_ATTACHMENT_PROXY=URL` names a proxy explicitly.
`CONE_ATTACHMENT_ALLOW_LOCAL=1` lifts the address check (plain `http://`, loopback and
private addresses) for tests and local networks. The client is aiohttp, cone's one
HTTP stack (docs/development.md).
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
import ssl
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult
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
# Seconds the fetcher waits at most with nothing due: a request accepted without a
# wake-up (a send to it accepts it) has its files fetched within this.
IDLE_CHECK_S: Final = 60.0
# Redirects followed, each checked and pinned like the first URL.
MAX_REDIRECTS: Final = 5
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


Resolve = Callable[[str, int], list[str]]


def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives for `host` (blocking), in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# IPv6 prefixes whose last 32 bits are an IPv4 address: IPv4-compatible (::/96,
# deprecated), NAT64's well-known prefix (RFC 6052).
_V4_IN_LOW_BITS: Final = (
    ipaddress.IPv6Network("::/96"),
    ipaddress.IPv6Network("64:ff9b::/96"),
)
# NAT64's local-use prefix (RFC 8215): a translator inside the operator's own network,
# with the IPv4 address at a place its prefix length decides: never public.
_NAT64_LOCAL: Final = ipaddress.IPv6Network("64:ff9b:1::/48")


def embedded_v4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, NAT64, 6to4,
    Teredo's server and client), none for a plain IPv6 address."""
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if any(address in net for net in _V4_IN_LOW_BITS):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


def public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether a peer's URL may reach `address`: a global address, and for an IPv6
    address that carries IPv4 ones, every one of those global too (a translator or
    tunnel would otherwise take cone to 169.254.169.254 or loopback)."""
    if not address.is_global:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64_LOCAL:
            return False
        return all(v4.is_global for v4 in embedded_v4(address))
    return True


@dataclass(frozen=True)
class Policy:
    """What a download may reach and how it resolves names (tests give their own)."""

    #: URL schemes fetched.
    schemes: tuple[str, ...] = ("https",)
    #: Whether an address may be connected to.
    allowed: Callable[[ipaddress.IPv4Address | ipaddress.IPv6Address], bool] = public
    #: The one lookup of a host name; its answer is the only place cone connects.
    resolve: Resolve = system_resolve
    #: TLS: True verifies against the system's CAs; a context verifies against its own.
    ssl: ssl.SSLContext | bool = True
    #: A proxy, only when configured (`CONE_ATTACHMENT_PROXY`): proxy variables of the
    #: environment (HTTPS_PROXY, ...) are never followed for a peer's URL.
    proxy: str | None = None

    @classmethod
    def from_env(cls) -> Policy:
        """The daemon's policy: public https only, or anything with allow_local()."""
        proxy = os.environ.get("CONE_ATTACHMENT_PROXY") or None
        if allow_local():
            return cls(schemes=("https", "http"), allowed=lambda _a: True, proxy=proxy)
        return cls(proxy=proxy)


def check_url(url: str, *, local: bool, policy: Policy | None = None) -> list[str]:
    """Refuse a URL cone must not fetch for a peer (DownloadError says why); else the
    addresses its host resolved to, checked: the only ones a download connects to."""
    if policy is None:
        policy = Policy(schemes=("https", "http"), allowed=lambda _a: True) if local else Policy()
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in policy.schemes:
        raise DownloadError(
            f"refused: only https:// URLs are fetched, not {parts.scheme or url[:40]}"
        )
    if not parts.hostname:
        raise DownloadError("refused: the URL names no host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise DownloadError("refused: the URL's port is not a number") from None
    try:
        addresses = [str(ipaddress.ip_address(parts.hostname))]
    except ValueError:
        try:
            addresses = policy.resolve(parts.hostname, port)
        except OSError as exc:
            raise DownloadError(f"cannot resolve {parts.hostname}: {exc}") from None
    if not addresses:
        raise DownloadError(f"cannot resolve {parts.hostname}: no address")
    for address in addresses:
        if not policy.allowed(ipaddress.ip_address(address.split("%")[0])):
            raise DownloadError(f"refused: {parts.hostname} resolves to a non-public address")
    return addresses


class _Pinned(AbstractResolver):
    """aiohttp's resolver for one download: a host name resolves to the addresses
    check_url checked for it, and to nothing else (no second lookup, no rebinding)."""

    def __init__(self) -> None:
        self.hosts: dict[str, list[str]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = self.hosts.get(host)
        if addresses is None:
            raise OSError(f"{host} was not checked")
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in addresses
        ]

    async def close(self) -> None:
        return None


async def _get(url: str, limit: int, policy: Policy) -> bytes:
    """The body of a GET, at most `limit` bytes; each redirect checked and pinned too."""
    pinned = _Pinned()
    if policy.proxy is not None:
        # The operator's proxy (configured, trusted) resolves the peer's name itself.
        proxy_host = yarl.URL(policy.proxy).host or ""
        pinned.hosts[proxy_host] = await asyncio.to_thread(
            system_resolve, proxy_host, yarl.URL(policy.proxy).port or 80
        )
    connector = aiohttp.TCPConnector(
        resolver=pinned, use_dns_cache=False, ssl=policy.ssl, limit=1, force_close=True
    )
    async with aiohttp.ClientSession(
        connector=connector, trust_env=False, headers={"User-Agent": "cone"}
    ) as session:
        for _hop in range(MAX_REDIRECTS + 1):
            hostname = urllib.parse.urlsplit(url).hostname or ""
            pinned.hosts[hostname] = await asyncio.to_thread(
                check_url, url, local=False, policy=policy
            )
            async with session.get(url, allow_redirects=False, proxy=policy.proxy) as r:
                if r.status in (301, 302, 303, 307, 308) and "Location" in r.headers:
                    url = str(r.url.join(yarl.URL(r.headers["Location"])))
                    continue
                if r.status != 200:
                    raise DownloadError(f"HTTP {r.status} from the server")
                declared = r.content_length
                if declared is not None and declared > limit:
                    raise DownloadError(
                        f"the file is {declared} bytes, over the {limit}-byte limit"
                    )
                body = bytearray()
                async for chunk in r.content.iter_chunked(_CHUNK):
                    body += chunk
                    if len(body) > limit:
                        raise DownloadError(f"the file is over the {limit}-byte limit")
                return bytes(body)
    raise DownloadError(f"more than {MAX_REDIRECTS} redirects")


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


async def download(ref: dict[str, Any], policy: Policy | None = None) -> content.AttachmentPart:
    """Fetch, check and decrypt one remote attachment, within `timeout_s()`."""
    policy = policy or Policy.from_env()
    try:
        async with asyncio.timeout(timeout_s()):
            payload = await _get(ref["url"], limits.REMOTE_ATTACHMENT_MAX_BYTES, policy)
    except TimeoutError:
        raise DownloadError("the download did not finish in time") from None
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        raise DownloadError(f"the download failed: {exc}") from None
    return await asyncio.to_thread(open_payload, ref, payload)


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
            wait = IDLE_CHECK_S
            if next_ns is not None:
                wait = min(wait, max(0.0, (next_ns - time.time_ns()) / 1e9))
            try:
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _one(self, item: ToFetch) -> None:
        ref = json.loads(item.remote_json)
        async with self._slots:
            try:
                part = await download(ref)
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
