"""The HTTP front's defences, each tried as an attack, on a real server in this process.

No core behind it (its socket does not exist): every route that needs the core
answers as the core being unavailable, which is enough to see what the guard lets
through. The same checks against a real daemon are in test_api.py.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import logging
import os
import ssl
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cone.errors import InvalidArgument, Unavailable
from cone.facades.http import _guard
from cone.facades.http.options import HttpOptions
from cone.facades.http.server import Serving, serving
from support.daemons import run_cone


class _NoCore:
    """The core behind a front these tests call nothing of: every call says it is gone."""

    async def call(
        self, rpc: str, request: Any, timeout: float | None = None, *, long_poll: bool = False
    ) -> Any:
        raise Unavailable("no core in this test", reason="daemon_unavailable")


NO_CORE = _NoCore()


RPC = {"jsonrpc": "2.0", "id": 1, "method": "identity"}


@pytest.fixture
async def front(tmp_path: Path) -> AsyncIterator[Serving]:
    async with serving(HttpOptions(), tmp_path, NO_CORE) as s:
        yield s


def _auth(s: Serving) -> dict[str, str]:
    return {"Authorization": f"Bearer {s.token_file.read_text().strip()}"}


async def _post(
    s: Serving, headers: dict[str, str], body: object = RPC
) -> tuple[int, dict[str, str]]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(s.url + "api/v1/rpc", json=body, headers=headers) as r,
    ):
        await r.read()
        return r.status, dict(r.headers)


async def test_the_token_is_made_once_private_and_required(front: Serving) -> None:
    assert stat.S_IMODE(front.token_file.stat().st_mode) == 0o600
    assert len(front.token_file.read_text().strip()) >= 40
    assert (await _post(front, {}))[0] == 401
    assert (await _post(front, {"Authorization": "Bearer wrong"}))[0] == 401
    token = front.token_file.read_text().strip()
    assert (await _post(front, {"Authorization": f"Bearer {token[:-1]}"}))[0] == 401
    assert (await _post(front, {"Authorization": f"Basic {token}"}))[0] == 401
    async with aiohttp.ClientSession() as session:
        for path in ("api/v1/events", "metrics"):
            async with session.get(front.url + path) as r:
                assert r.status == 401, path
        async with session.get(front.url + "api/v1/health") as r:
            assert r.status == 503  # no core here: unhealthy, but answered without a token
            assert await r.json() == {"healthy": False}  # the reasons only with the token
    # With the token the request passes the guard and reaches the (absent) core.
    status, _ = await _post(front, _auth(front))
    assert status == 200


async def test_the_token_survives_a_restart(tmp_path: Path) -> None:
    async with serving(HttpOptions(), tmp_path, NO_CORE) as first:
        token = first.token_file.read_text()
    async with serving(HttpOptions(), tmp_path, NO_CORE) as second:
        assert second.token_file.read_text() == token


async def test_a_foreign_host_header_is_refused(front: Serving) -> None:
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own name."""
    status, _ = await _post(front, {**_auth(front), "Host": f"evil.example:{front.port}"})
    assert status == 421
    status, _ = await _post(front, {**_auth(front), "Host": "127.0.0.1:1"})
    assert status == 421
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            front.url + "api/v1/health", headers={"Host": f"evil.example:{front.port}"}
        ) as r,
    ):
        assert r.status == 421
    for host in (f"localhost:{front.port}", f"127.0.0.1:{front.port}"):
        assert (await _post(front, {**_auth(front), "Host": host}))[0] == 200


async def test_configured_host_names_pass_the_host_check(tmp_path: Path) -> None:
    options = HttpOptions(host_names=("cone.internal",))
    async with serving(options, tmp_path, NO_CORE) as s:
        assert (await _post(s, {**_auth(s), "Host": f"cone.internal:{s.port}"}))[0] == 200
        assert (await _post(s, {**_auth(s), "Host": f"other.internal:{s.port}"}))[0] == 421


async def test_a_cross_origin_post_is_refused_and_no_cors_is_offered(front: Serving) -> None:
    """CSRF: another site's page posting with the user's browser."""
    status, headers = await _post(front, {**_auth(front), "Origin": "https://evil.example"})
    assert status == 403
    assert "Access-Control-Allow-Origin" not in headers
    own = f"http://127.0.0.1:{front.port}"
    assert (await _post(front, {**_auth(front), "Origin": own}))[0] == 200
    async with (
        aiohttp.ClientSession() as session,
        session.options(
            front.url + "api/v1/rpc",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        ) as r,
    ):
        assert r.status == 403
        assert "Access-Control-Allow-Origin" not in r.headers


async def test_cors_answers_only_a_configured_origin(tmp_path: Path) -> None:
    options = HttpOptions(cors_origins=("https://app.example",))
    async with (
        serving(options, tmp_path, NO_CORE) as s,
        aiohttp.ClientSession() as session,
    ):
        for origin, allowed in (("https://app.example", True), ("https://evil.example", False)):
            async with session.options(
                s.url + "api/v1/rpc",
                headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
            ) as r:
                assert (r.headers.get("Access-Control-Allow-Origin") == origin) is allowed
            status, headers = await _post(s, {**_auth(s), "Origin": origin})
            assert (status == 200) is allowed
            assert (headers.get("Access-Control-Allow-Origin") == origin) is allowed


async def test_json_rpc_wants_json_and_a_bounded_body(
    front: Serving, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(
            front.url + "api/v1/rpc",
            data=b'{"jsonrpc":"2.0","id":1,"method":"identity"}',
            headers={**_auth(front), "Content-Type": "text/plain"},
        ) as r:
            assert r.status == 415  # a form or text/plain post (a simple CSRF) never runs
        big = (
            b'{"jsonrpc":"2.0","id":1,"method":"identity","params":{"x":"'
            + b"a" * (_guard.MAX_BODY_BYTES)
            + b'"}}'
        )
        async with session.post(
            front.url + "api/v1/rpc",
            data=io.BytesIO(big),
            headers={**_auth(front), "Content-Type": "application/json"},
        ) as r:
            assert r.status == 413


async def _half_request(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /api/v1/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the rest
    await writer.drain()
    return reader, writer


async def test_slow_clients_hold_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slowloris: connections that never finish their headers are closed, and over the
    bound of connections new ones are refused rather than queued."""
    monkeypatch.setattr(_guard, "HEADER_TIMEOUT_S", 1.0)
    monkeypatch.setattr(_guard, "MAX_CONNECTIONS", 4)
    async with serving(HttpOptions(), tmp_path, NO_CORE) as s:
        slow = [await _half_request(s.port) for _ in range(4)]
        # Over the bound: closed at once.
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        async with asyncio.timeout(5):
            assert await reader.read() == b""
        writer.close()
        # The slow ones are closed by the header deadline...
        async with asyncio.timeout(10):
            for reader, writer in slow:
                assert await reader.read() == b""
                writer.close()
        # ... and then a normal client is served.
        status, _ = await _post(s, _auth(s))
        assert status == 200


async def test_a_body_that_does_not_arrive_in_time_is_answered_408(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_guard, "BODY_TIMEOUT_S", 0.5)
    async with serving(HttpOptions(), tmp_path, NO_CORE) as s:
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        token = s.token_file.read_text().strip()
        writer.write(
            f"POST /api/v1/rpc HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100\r\n\r\n{".encode()
        )
        await writer.drain()
        async with asyncio.timeout(10):
            answer = await reader.read()
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408 ")


def test_a_network_address_needs_tls_or_an_explicit_insecure_flag() -> None:
    with pytest.raises(InvalidArgument, match="--http-insecure"):
        HttpOptions(host="0.0.0.0", port=8080).check()
    with pytest.raises(InvalidArgument, match="go together"):
        HttpOptions(host="127.0.0.1", cert=Path("c.pem")).check()
    HttpOptions(host="0.0.0.0", insecure=True).check()
    HttpOptions(host="0.0.0.0", cert=Path("c.pem"), key=Path("k.pem")).check()
    HttpOptions(host="::1").check()


async def test_insecure_on_the_network_says_so_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = HttpOptions(host="0.0.0.0", insecure=True)
    async with serving(options, tmp_path, NO_CORE):
        pass
    assert "WARNING: plain HTTP on a non-loopback address" in capsys.readouterr().err


def _tls_files(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(
        fd,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    os.close(fd)
    return cert_file, key_file


async def test_tls_serves_https_only(tmp_path: Path) -> None:
    cert, key = _tls_files(tmp_path)
    options = HttpOptions(host="127.0.0.1", cert=cert, key=key)
    async with serving(options, tmp_path, NO_CORE) as s:
        assert s.url.startswith("https://")
        trust = ssl.create_default_context(cafile=str(cert))
        url = f"https://localhost:{s.port}/api/v1/health"
        async with aiohttp.ClientSession() as session:
            async with session.get(url, ssl=trust) as r:
                assert r.status == 503  # answered over TLS (no core here)
            with pytest.raises(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{s.port}/api/v1/health") as r:
                    await r.read()


async def test_the_daemon_refuses_plain_http_on_the_network_before_touching_state(
    tmp_path: Path,
) -> None:
    home = tmp_path / "state"
    code, err = await run_cone(["daemon", "--home", str(home), "--http", "0.0.0.0:0"])
    assert code == 2
    assert b"--http-insecure" in err
    assert not home.exists()


async def test_an_idle_keep_alive_connection_closes_without_a_default_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A browser's or curl's keep-alive connection that goes quiet after its answer is
    closed by the header deadline: ordinary, so logged at debug only."""
    monkeypatch.setattr(_guard, "HEADER_TIMEOUT_S", 0.3)
    caplog.set_level(logging.DEBUG, logger="cone.facades.http")
    async with serving(HttpOptions(), tmp_path, NO_CORE) as s:
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        writer.write(f"GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n\r\n".encode())
        await writer.drain()
        async with asyncio.timeout(10):
            answer = await reader.read()  # the answer, then the close at the deadline
        writer.close()
        assert answer.startswith(b"HTTP/1.1 200 ")
    closes = [r for r in caplog.records if "no complete request" in r.getMessage()]
    assert [r.levelno for r in closes] == [logging.DEBUG]
    assert not [r for r in caplog.records if r.levelno >= logging.INFO and "HTTP" in r.getMessage()]
