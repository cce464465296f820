"""The daemon owns one identity in a private, encrypted state directory."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cone.engine import _client
from cone.grpc_errors import from_rpc_error
from conepb.v1 import cone_pb2 as pb
from support.daemons import BACKENDS, DaemonProcess, run_cone
from support.peers import Peer
from support.shared import *  # noqa: F403 (the fixtures that share a devnet and daemons)
from support.waiting import until

# One devnet and one daemon per backend for the module (tests/support/shared.py);
# a test that damages the state directory has a daemon of its own.
pytestmark = pytest.mark.asyncio(loop_scope="module")

#: The module's daemons' preface bound (`PREFACE_TIMEOUT_S`, 10 s, shortened): the
#: test of the bound waits it out.
PREFACE_S = 2.0


@pytest.fixture(scope="module")
def daemon_env() -> dict[str, str]:
    """The module's daemons, with the preface bound shortened."""
    return {"CONE_PREFACE_TIMEOUT_S": str(PREFACE_S)}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_identity_reports_protocol_1_the_registered_inbox_and_its_backend(
    daemon: DaemonProcess, alice: Peer, backend: str
) -> None:
    ident = await daemon.client.identity()
    assert ident.protocol == 1
    assert ident.network == "local"
    assert ident.backend == backend
    status = await daemon.client.call("Status", pb.StatusRequest())
    assert status.identity.backend == backend
    assert len(ident.inbox_id) == 64 and ident.address.startswith("0x")
    # The identity is registered on the network: a peer resolves its address.
    found = await alice.client.find_inbox_id(
        alice.identifier().__class__(
            identifier=ident.address, identifier_kind=alice.identifier().identifier_kind
        )
    )
    assert found == ident.inbox_id


async def test_state_directory_is_private(daemon: DaemonProcess) -> None:
    assert stat.S_IMODE(daemon.home.stat().st_mode) == 0o700
    for f in daemon.home.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f.name


async def test_a_second_daemon_on_the_same_home_is_refused_clearly(daemon: DaemonProcess) -> None:
    code, err = await run_cone(daemon.args())
    assert code == 6
    assert b"another cone process" in err
    assert (await daemon.client.identity()).protocol == 1


async def test_restart_continues_as_the_same_identity(daemon: DaemonProcess) -> None:
    before = await daemon.client.identity()
    assert await daemon.stop() == 0
    await daemon.start()
    after = await daemon.client.identity()
    assert (after.inbox_id, after.installation_id) == (before.inbox_id, before.installation_id)


async def test_a_wrong_database_key_is_refused_and_changes_nothing(
    daemon: DaemonProcess,
) -> None:
    await daemon.stop()

    def data_files() -> dict[str, bytes]:
        # cone.lock only records who holds the lock; everything else must stay as it was.
        return {
            f.name: f.read_bytes()
            for f in daemon.home.iterdir()
            if f.is_file() and f.name != "cone.lock"
        }

    files = data_files()
    env = {**os.environ, "CONE_DB_KEY": "00" * 32}
    code, err = await run_cone(daemon.args(), env)
    assert code == 6
    assert b"database key does not open" in err
    assert data_files() == files


async def test_a_missing_libxmtp_database_is_refused_not_reregistered(
    own_daemon: DaemonProcess,
) -> None:
    await own_daemon.stop()
    (own_daemon.home / "xmtp.db3").unlink()
    code, err = await run_cone(own_daemon.args())
    assert code == 6
    assert b"new XMTP installation" in err


async def test_health_and_reflection_answer_on_the_socket(daemon: DaemonProcess) -> None:
    async with grpc.aio.insecure_channel(f"unix:{daemon.socket}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service="cone.v1.ConeService"))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_status_reports_streams_and_budgets(daemon: DaemonProcess) -> None:
    # The daemon answers before its start opens the streams (docs/guarantees.md).
    async def streams_open() -> pb.StatusResponse | None:
        status = await daemon.client.call("Status", pb.StatusRequest())
        return status if status.streams and all(s.connected for s in status.streams) else None

    status = await until(streams_open)
    assert {s.name for s in status.streams} == {
        "messages",
        "requests",
        "accepted",
        "conversations",
        "consent",
    }
    assert status.installations == 1
    assert status.identity_updates >= 1


async def test_a_wallet_key_from_the_environment_is_imported_on_first_start(
    devnet: str, home: Path
) -> None:
    key = _client.generate_wallet_key()
    async with DaemonProcess(home, devnet, {"CONE_WALLET_KEY": "0x" + key.hex()}) as d:
        ident = await d.client.identity()
    assert ident.address == _client.wallet_address(key)
    assert ident.inbox_id == _client.inbox_id_for(ident.address)
    # Another key later is refused rather than silently ignored.
    other = {**os.environ, "CONE_WALLET_KEY": _client.generate_wallet_key().hex()}
    code, err = await run_cone(d.args(), other)
    assert code == 6 and b"does not match" in err


async def test_reflection_lists_the_services_on_the_socket_as_v1_and_v1alpha(
    daemon: DaemonProcess,
) -> None:
    from grpc_reflection.v1alpha import reflection_pb2

    request = reflection_pb2.ServerReflectionRequest(list_services="")
    async with grpc.aio.insecure_channel(f"unix:{daemon.socket}") as channel:
        for package in ("grpc.reflection.v1alpha", "grpc.reflection.v1"):
            # The two versions are the same messages under another package name.
            call = channel.stream_stream(
                f"/{package}.ServerReflection/ServerReflectionInfo",
                request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
            )
            async for reply in call(iter([request])):
                names = {s.name for s in reply.list_services_response.service}
                break
            assert {"cone.v1.ConeService", "grpc.health.v1.Health"} <= names, package
            assert {"grpc.reflection.v1.ServerReflection"} <= names


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
async def test_the_socket_refuses_another_user_even_when_files_allow_it(
    own_daemon: DaemonProcess,
) -> None:
    # Open the file permissions on purpose: the peer-credential check must still refuse.
    own_daemon.home.chmod(0o711)
    own_daemon.socket.chmod(0o666)
    probe = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)\n"
        "try:\n"
        '    s.sendall(b\'{"jsonrpc":"2.0","id":1,"method":"identity"}\\n\')\n'
        "    print(repr(s.recv(100)))\n"
        "except (BrokenPipeError, ConnectionResetError):\n"
        "    print(\"b''\")  # closed before the request was even read\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", probe, str(own_daemon.socket),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "b''"  # closed without an answer
    assert (await own_daemon.client.identity()).protocol == 1


async def test_a_connection_that_stops_part_way_through_the_http2_preface_is_closed(
    daemon: DaemonProcess,
) -> None:
    reader, writer = await asyncio.open_unix_connection(str(daemon.socket))
    try:
        # Taken before the write: the daemon's bound starts once the bytes are there.
        started = asyncio.get_running_loop().time()
        writer.write(b"PRI *")  # 5 bytes of the preface, then nothing
        await writer.drain()
        assert await asyncio.wait_for(reader.read(100), PREFACE_S + 20) == b""
        assert asyncio.get_running_loop().time() - started >= PREFACE_S - 0.5
    finally:
        writer.close()
    assert (await daemon.client.identity()).protocol == 1  # everyone else is still served


async def test_a_request_that_does_not_decode_is_invalid_argument_with_details(
    daemon: DaemonProcess,
) -> None:
    async with grpc.aio.insecure_channel(f"unix:{daemon.socket}") as channel:
        for method, raw in [
            ("/cone.v1.ConeService/Send", b"\x0a\x02\xff\xfe"),  # bad UTF-8 in `to`
            ("/cone.v1.ConeService/Identity", b"\xff\xff\xff"),  # a corrupt body
            ("/cone.v1.ConeService/WaitForMessages", b"\xff\xff\xff"),  # unknown method too
        ]:
            call = channel.unary_unary(
                method, request_serializer=lambda b: b, response_deserializer=lambda b: b
            )
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call(raw, timeout=10)
            if method.endswith("WaitForMessages"):
                assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
                continue
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value
            err = from_rpc_error(caught.value)
            assert err.reason == "invalid_argument" and "does not decode" in err.message
    assert (await daemon.client.identity()).protocol == 1
