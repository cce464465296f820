"""Remote attachments downloaded: a peer's URL checked, fetched, its payload checked
and decrypted (cone/engine/roles/attachments.py is the role; `Engine` delegates here).

A plain HTTP(S) GET, bounded in size (`limits.REMOTE_ATTACHMENT_MAX_BYTES`) and time
(`DOWNLOAD_TIMEOUT_S`, or `CONE_ATTACHMENT_TIMEOUT_S`); the digest is checked, the key
derived with HKDF-SHA256 (the 32-byte secret, the message's salt, no info) and the
payload opened with AES-256-GCM (its nonce, no associated data).

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
import os
import socket
import ssl
import urllib.parse
from collections.abc import Callable, Mapping
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
from cone.engine.roles.attachments import DownloadError

DOWNLOAD_TIMEOUT_S: Final = 60.0
# Redirects followed, each checked and pinned like the first URL.
MAX_REDIRECTS: Final = 5
_CHUNK = 64 * 1024


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


def decrypt(ref: Mapping[str, Any], payload: bytes) -> bytes:
    """Check a downloaded payload against the reference's digest and decrypt it: the
    attachment's envelope."""
    if hashlib.sha256(payload).hexdigest() != ref["contentDigest"]:
        raise DownloadError("the downloaded file does not match the message's digest")
    key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=bytes.fromhex(ref["salt"]), info=b""
    ).derive(bytes.fromhex(ref["secret"]))
    try:
        return AESGCM(key).decrypt(bytes.fromhex(ref["nonce"]), payload, None)
    except InvalidTag:
        raise DownloadError("the downloaded file does not decrypt with the message's key") from None


async def download(ref: Mapping[str, Any], policy: Policy | None = None) -> bytes:
    """Fetch, check and decrypt one remote attachment within `timeout_s()`: its
    envelope (the daemon's policy, `Policy.from_env`, unless given)."""
    policy = policy or Policy.from_env()
    try:
        async with asyncio.timeout(timeout_s()):
            payload = await _get(ref["url"], limits.REMOTE_ATTACHMENT_MAX_BYTES, policy)
    except TimeoutError:
        raise DownloadError("the download did not finish in time") from None
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        raise DownloadError(f"the download failed: {exc}") from None
    return await asyncio.to_thread(decrypt, ref, payload)


__all__ = ["Policy", "check_url", "decrypt", "download", "embedded_v4", "public", "timeout_s"]
