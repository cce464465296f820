"""Fault injection from outside the process: `cone.devnet.v1.DevnetControl` on a Unix socket.

The devnet serves it with `--control PATH` (or `Devnet(control_socket=PATH)`);
`ControlClient` and `cone devnet-ctl` call it. Server reflection is on, so
`grpcurl -plaintext -unix PATH list` works too. The socket is made 0600; put it in
a directory only you can reach.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any, Protocol

import grpc
import grpc.aio
from grpc_reflection.v1alpha import reflection

from cone.devnet.faults import Faults
from cone.devnet.stats import Stats
from cone.errors import InvalidArgument, StateError
from conepb.devnet.v1 import control_pb2 as pb
from conepb.devnet.v1 import control_pb2_grpc as pb_grpc


class Controlled(Protocol):
    """What DevnetControl steers and reads of a running devnet (`Devnet`, which
    serves this module)."""

    faults: Faults
    stats: Stats

    @property
    def open_streams(self) -> int: ...


class ControlService(pb_grpc.DevnetControlServicer):
    """DevnetControl over one running devnet."""

    def __init__(self, devnet: Controlled) -> None:
        self._devnet = devnet

    async def DropStreams(
        self, request: pb.DropStreamsRequest, context: Any
    ) -> pb.DropStreamsResponse:
        return pb.DropStreamsResponse(dropped_streams=self._devnet.faults.drop_streams())

    async def FailCalls(self, request: pb.FailCallsRequest, context: Any) -> pb.FailCallsResponse:
        code = status_code(request.code)
        path = self._devnet.faults.fail_next(request.method, request.count, code, request.message)
        return pb.FailCallsResponse(method=path)

    async def SetLatency(
        self, request: pb.SetLatencyRequest, context: Any
    ) -> pb.SetLatencyResponse:
        path = self._devnet.faults.set_latency(request.method, request.latency_ms / 1000)
        return pb.SetLatencyResponse(method=path)

    async def ClearFaults(
        self, request: pb.ClearFaultsRequest, context: Any
    ) -> pb.ClearFaultsResponse:
        self._devnet.faults.clear()
        return pb.ClearFaultsResponse()

    async def SetV3Cutover(
        self, request: pb.SetV3CutoverRequest, context: Any
    ) -> pb.SetV3CutoverResponse:
        faults = self._devnet.faults
        if not request.on:
            ended = faults.set_cutover(None)
        else:
            ended = faults.set_cutover(request.at_ns or time.time_ns())
        return pb.SetV3CutoverResponse(ended_streams=ended, cutover_ns=faults.cutover_ns)

    async def GetStats(self, request: pb.GetStatsRequest, context: Any) -> pb.GetStatsResponse:
        stats = self._devnet.stats
        return pb.GetStatsResponse(
            methods=[
                pb.MethodStats(method=name, calls=t.calls, total_ns=t.total_ns)
                for name, t in sorted(stats.methods.items())
            ],
            stream_deliveries=stats.deliveries,
            stream_delivery_total_ns=stats.delivery_total_ns,
            open_streams=self._devnet.open_streams,
        )


def status_code(value: int | str) -> grpc.StatusCode:
    """A gRPC status code from its number (1–16, also as text) or name (`UNAVAILABLE`)."""
    if isinstance(value, str):
        value = int(value) if value.isdigit() else value.upper()
    for code in grpc.StatusCode:
        if code is not grpc.StatusCode.OK and value in (code.value[0], str(code.name)):
            return code
    raise InvalidArgument(
        f"{value!r} is not a gRPC status code: use 1–16 or a name such as UNAVAILABLE",
        field="code",
    )


async def serve(
    path: str, devnet: Controlled, interceptor: grpc.aio.ServerInterceptor
) -> grpc.aio.Server:
    """Serve DevnetControl for `devnet` on the Unix socket `path`."""
    _claim(path)
    server = grpc.aio.server(interceptors=[interceptor])
    pb_grpc.add_DevnetControlServicer_to_server(ControlService(devnet), server)
    service = pb.DESCRIPTOR.services_by_name["DevnetControl"].full_name
    reflection.enable_server_reflection((service, reflection.SERVICE_NAME), server)
    server.add_insecure_port(f"unix:{path}")
    os.chmod(path, 0o600)
    await server.start()
    return server


def _claim(path: str) -> None:
    """Remove a stale socket at `path`; refuse one a live process still serves."""
    target = Path(path)
    if not target.exists():
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        if target.is_socket():
            target.unlink()
            return
        raise StateError(
            f"{path} exists and is not a socket: choose another --control path",
            reason="devnet_control_unavailable",
        ) from None
    finally:
        probe.close()
    raise StateError(
        f"{path} is served by another process (another devnet?): choose another --control path",
        reason="devnet_control_unavailable",
    )


def release(path: str) -> None:
    """Remove the control socket file once its server has stopped."""
    Path(path).unlink(missing_ok=True)


class ControlClient:
    """A blocking client of a devnet's control socket, for tests, benchmarks and the CLI."""

    def __init__(self, path: str | Path) -> None:
        self._channel = grpc.insecure_channel(f"unix:{path}")
        self._stub = pb_grpc.DevnetControlStub(self._channel)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def drop_streams(self) -> int:
        """End every open stream now; returns how many were open."""
        response = self._stub.DropStreams(pb.DropStreamsRequest())
        return int(response.dropped_streams)

    def fail_next(
        self, method: str, count: int, code: int | str = "UNAVAILABLE", message: str = ""
    ) -> str:
        """Fail the method's next `count` calls with `code`; returns the method's full path."""
        number = status_code(code).value[0]
        response = self._stub.FailCalls(
            pb.FailCallsRequest(method=method, count=count, code=number, message=message)
        )
        return str(response.method)

    def set_latency(self, method: str, seconds: float) -> str:
        """Delay each later call of the method (0 removes); returns its full path."""
        response = self._stub.SetLatency(
            pb.SetLatencyRequest(method=method, latency_ms=round(seconds * 1000))
        )
        return str(response.method)

    def clear(self) -> None:
        """Remove every pending failure and latency, and the V3 cutover."""
        self._stub.ClearFaults(pb.ClearFaultsRequest())

    def set_v3_cutover(self, on: bool = True) -> int:
        """Answer as a V3 node after its D14N cutover (or stop); returns the streams ended."""
        response = self._stub.SetV3Cutover(pb.SetV3CutoverRequest(on=on))
        return int(response.ended_streams)

    def set_cutover(self, at_ns: int | None) -> pb.SetV3CutoverResponse:
        """Set the cutover time in Unix nanoseconds (None: none); the response says
        how many streams ended now and the time set."""
        request = pb.SetV3CutoverRequest(on=at_ns is not None, at_ns=at_ns or 0)
        response: pb.SetV3CutoverResponse = self._stub.SetV3Cutover(request)
        return response

    def stats(self) -> pb.GetStatsResponse:
        """Calls and server time per method and per streamed delivery."""
        response: pb.GetStatsResponse = self._stub.GetStats(pb.GetStatsRequest())
        return response
