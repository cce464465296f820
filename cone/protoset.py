"""`cone proto FILE`: cone's service as one descriptor set, from the installed cone.

A client in another language loads ConeService from a FileDescriptorSet of
`conepb/v1/cone.proto` and every file it imports (buf/validate/validate.proto,
google/protobuf/*): protoc's `--descriptor_set_in`, grpcurl's `-protoset`,
proto-loader's `loadFileDescriptorSetFromBuffer` (docs/protocol.md). A checkout has
it as `proto/cone.protoset`; an installed cone writes the same files with this command,
from the descriptors its generated modules register (as gRPC reflection on cone.sock
serves them; without the comments, which protoc keeps out of generated modules).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def descriptor_set() -> bytes:
    """cone.proto and every file it imports, each after the files it imports."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.descriptor import FileDescriptor

    from conepb.v1 import cone_pb2

    files: list[descriptor_pb2.FileDescriptorProto] = []
    seen: set[str] = set()

    def add(file: FileDescriptor) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            add(dependency)
        files.append(descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb))

    add(cone_pb2.DESCRIPTOR)
    data: bytes = descriptor_pb2.FileDescriptorSet(file=files).SerializeToString(deterministic=True)
    return data


def run(args: argparse.Namespace) -> int:
    """Write the descriptor set to FILE; say what it is and how to load it."""
    from cone._command import exit_code
    from cone.errors import StateError

    target = Path(args.file)

    def body() -> None:
        try:
            target.write_bytes(descriptor_set())
        except OSError as err:
            raise StateError(f"cannot write {target}: {err.strerror}") from None
        print(
            f"wrote cone.v1.ConeService's descriptor set (conepb/v1/cone.proto and every "
            f"file it imports) to {target}: load it with grpcurl -protoset, protoc "
            "--descriptor_set_in or proto-loader (docs/protocol.md)",
            file=sys.stderr,
        )

    return exit_code("proto", body)


__all__ = ["descriptor_set", "run"]
