"""gRPC server reflection under both names tools ask for: v1 and v1alpha.

grpcio-reflection (1.85) ships only `grpc.reflection.v1alpha`; newer tools (grpcurl,
Postman) ask for `grpc.reflection.v1` first. The two services are the same protocol
under another package name (identical messages, field for field), so one servicer
answers both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1_SERVICE_NAME: Final = "grpc.reflection.v1.ServerReflection"


def enable(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Serve reflection for `service_names` (and itself) as v1 and v1alpha."""
    names = [*service_names, reflection.SERVICE_NAME, V1_SERVICE_NAME]
    servicer = reflection.aio.ReflectionServicer(names)
    handlers = {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        )
    }
    for service in (reflection.SERVICE_NAME, V1_SERVICE_NAME):
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))


__all__ = ["V1_SERVICE_NAME", "enable"]
