"""The remote-attachment download connects to the very addresses it checked.

A peer's DNS may answer a public address to the check and 127.0.0.1 to the connect
(rebinding). Here a resolver answers 127.0.0.1 first and 127.0.0.2 second, and the
policy calls only 127.0.0.1 "public": the file must come from 127.0.0.1, with one
lookup, and 127.0.0.2 (the "private service") must never be asked. TLS is verified for
the URL's name even though the connection goes to a pinned address; proxy variables of
the environment are not followed.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cone.engine import _download as attachments
from cone.engine._download import Policy
from cone.engine.roles.attachments import DownloadError

PUBLIC = "127.0.0.1"
PRIVATE = "127.0.0.2"
NAME = "files.example"


class Rebinding:
    """A resolver that answers PUBLIC the first time and PRIVATE after."""

    def __init__(self) -> None:
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        return [PUBLIC] if len(self.lookups) == 1 else [PRIVATE]


def _only_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return str(address) == PUBLIC


@asynccontextmanager
async def _serving(
    host: str, body: bytes, hits: list[str], port: int = 0, tls: ssl.SSLContext | None = None
) -> AsyncIterator[int]:
    async def handle(request: web.Request) -> web.Response:
        hits.append(host)
        if request.path == "/moved":
            raise web.HTTPFound(f"http://{NAME}:{request.url.port}/file")
        return web.Response(body=body)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


@asynccontextmanager
async def _two_servers(tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[int, list[str]]]:
    """The same port on PUBLIC (the file) and PRIVATE (a private service)."""
    hits: list[str] = []
    async with _serving(PUBLIC, b"public file", hits, tls=tls) as port:
        async with _serving(PRIVATE, b"private secret", hits, port=port, tls=tls):
            yield port, hits


async def test_the_download_connects_to_the_address_it_checked() -> None:
    resolver = Rebinding()
    policy = Policy(schemes=("http",), allowed=_only_public, resolve=resolver)
    async with _two_servers() as (port, hits):
        body = await attachments._get(f"http://{NAME}:{port}/file", 1000, policy)
    assert body == b"public file"
    assert hits == [PUBLIC]
    assert resolver.lookups == [NAME]


async def test_a_redirect_is_checked_again_and_refused_when_it_resolves_private() -> None:
    resolver = Rebinding()
    policy = Policy(schemes=("http",), allowed=_only_public, resolve=resolver)
    async with _two_servers() as (port, hits):
        with pytest.raises(DownloadError, match="non-public"):
            await attachments._get(f"http://{NAME}:{port}/moved", 1000, policy)
    assert hits == [PUBLIC]  # the redirect's second lookup said PRIVATE: never connected
    assert resolver.lookups == [NAME, NAME]


async def test_proxy_variables_of_the_environment_are_not_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hits: list[str] = []
    async with _serving(PRIVATE, b"proxy", hits) as proxy_port:
        for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
            monkeypatch.setenv(var, f"http://{PRIVATE}:{proxy_port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        policy = Policy(schemes=("http",), allowed=_only_public, resolve=Rebinding())
        async with _serving(PUBLIC, b"direct", hits) as port:
            body = await attachments._get(f"http://{NAME}:{port}/file", 1000, policy)
    assert body == b"direct"
    assert hits == [PUBLIC]


def _certificate(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for `name`: (server context, client context trusting it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


async def test_tls_is_verified_for_the_name_on_the_pinned_address(tmp_path: Path) -> None:
    server_tls, client_tls = _certificate(tmp_path, NAME)
    policy = Policy(allowed=_only_public, resolve=Rebinding(), ssl=client_tls)
    async with _two_servers(server_tls) as (port, hits):
        body = await attachments._get(f"https://{NAME}:{port}/file", 1000, policy)
    assert body == b"public file"
    assert hits == [PUBLIC]


async def test_a_certificate_for_another_name_is_refused(tmp_path: Path) -> None:
    server_tls, client_tls = _certificate(tmp_path, "other.example")
    policy = Policy(allowed=_only_public, resolve=Rebinding(), ssl=client_tls)
    async with _two_servers(server_tls) as (port, hits):
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await attachments._get(f"https://{NAME}:{port}/file", 1000, policy)
    assert hits == []
