"""The devnet node: a grpc.aio server for XMTP's V3 API (MlsApi, IdentityApi) and its
D14N gateway and node APIs (PayerApi, ReplicationApi, gRPC health) on one port,
over one store, as a context manager.

node = Devnet(port=0)               # memory; Devnet(db="devnet.db") persists
async with node as url:             # "http://127.0.0.1:PORT"
    node.faults.drop_streams()
"""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from types import TracebackType
from typing import Final

import grpc
import grpc.aio

from cone.devnet import control
from cone.devnet.cutover import NO_CUTOVER_NS, MigrationService
from cone.devnet.d14n import add_d14n_services
from cone.devnet.faults import Faults
from cone.devnet.hub import EndReason, Hub
from cone.devnet.identity_service import IdentityService
from cone.devnet.interceptor import DevnetInterceptor
from cone.devnet.mls_service import MlsService
from cone.devnet.stats import Stats
from cone.devnet.store import GroupMessageRow, Store, WelcomeRow
from cone.devnet.streams import StreamServer
from cone.devnet.wire import GRPC_MESSAGE_LIMIT
from cone.errors import TargetError
from conepb.xmtp import identity_api_pb2, identity_api_pb2_grpc, mls_api_pb2, mls_api_pb2_grpc
from conepb.xmtpmigration import migration_pb2, migration_pb2_grpc
from conepb.xmtpv4 import message_api_pb2, payer_api_pb2

#: Server options libxmtp needs (see docs/devnet.md): big messages, and tolerance
#: of its HTTP/2 PING every 16 s even on idle connections (grpc's defaults answer
#: the third such ping with GOAWAY too_many_pings, killing every stream).
GRPC_OPTIONS: Final = (
    ("grpc.max_receive_message_length", GRPC_MESSAGE_LIMIT),
    ("grpc.max_send_message_length", GRPC_MESSAGE_LIMIT),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
    # Fail to start on a port already in use rather than share it silently.
    ("grpc.so_reuseport", 0),
)

#: Seconds stop() lets calls in flight finish before cancelling them.
STOP_GRACE_S: Final = 1.0

NODE_METHODS: Final = tuple(
    f"/{service.full_name}/{method.name}"
    for service in (
        mls_api_pb2.DESCRIPTOR.services_by_name["MlsApi"],
        identity_api_pb2.DESCRIPTOR.services_by_name["IdentityApi"],
        migration_pb2.DESCRIPTOR.services_by_name["D14nMigrationApi"],
        payer_api_pb2.DESCRIPTOR.services_by_name["PayerApi"],
        message_api_pb2.DESCRIPTOR.services_by_name["ReplicationApi"],
    )
    for method in service.methods
)


class Devnet:
    """One local XMTP node. `async with Devnet() as url` serves it and yields its URL."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        db: str | Path | None = None,
        control_socket: str | Path | None = None,
        cutover_ns: int | None = None,
    ) -> None:
        """Listen on host:port (0 picks a free port); keep state in `db` (None: memory);
        serve fault injection on the Unix socket `control_socket` if given; cut the
        V3 side over to D14N at `cutover_ns` (Unix ns; None: no cutover set)."""
        self.host = host
        self.port = port
        self.db = None if db is None else str(db)
        self.control_socket = None if control_socket is None else str(control_socket)
        self.stats = Stats()
        self._groups: Hub[GroupMessageRow] = Hub()
        self._welcomes: Hub[WelcomeRow] = Hub()
        self.faults = Faults(NODE_METHODS, self._drop_streams)
        self._store: Store | None = None
        self._server: grpc.aio.Server | None = None
        self._control: grpc.aio.Server | None = None
        self.faults.set_cutover(cutover_ns)

    @property
    def url(self) -> str:
        """The URL libxmtp connects to: `http://host:port` (h2c)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def open_streams(self) -> int:
        """How many subscriptions are open now."""
        return len(self._groups) + len(self._welcomes)

    async def start(self) -> str:
        """Open the store, start serving, and return the URL."""
        address = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        # Checked first: a second devnet on a used port says so, not that its default
        # database (named after the port) is held.
        refused = _port_in_use(self.host, self.port)
        if refused is not None:
            raise _unavailable(address, refused)
        store = self._store = Store(self.db)
        interceptor = DevnetInterceptor(self.faults, self.stats)
        server = grpc.aio.server(interceptors=[interceptor], options=GRPC_OPTIONS)
        streams = StreamServer(store, self._groups, self._welcomes, self.stats)
        await add_d14n_services(
            server, store, self._groups, self._welcomes, self.stats, lambda: self.url
        )
        mls_api_pb2_grpc.add_MlsApiServicer_to_server(
            MlsService(store, self._groups, self._welcomes, streams), server
        )
        identity_api_pb2_grpc.add_IdentityApiServicer_to_server(IdentityService(store), server)
        migration_pb2_grpc.add_D14nMigrationApiServicer_to_server(
            MigrationService(self.faults), server
        )
        if self.faults.cutover_ns < NO_CUTOVER_NS:
            # Again on this loop, so that a time to come ends streams when it arrives.
            self.faults.set_cutover(self.faults.cutover_ns)
        try:
            self.port = server.add_insecure_port(address)
        except RuntimeError:
            store.close()
            raise _unavailable(address, _IN_USE) from None  # taken meanwhile
        self._server = server
        await server.start()
        if self.control_socket is not None:
            try:
                self._control = await control.serve(self.control_socket, self, interceptor)
            except BaseException:
                await self.stop(0)
                raise
        return self.url

    async def stop(self, grace: float = STOP_GRACE_S) -> None:
        """End every stream with UNAVAILABLE, stop serving and close the store."""
        self._groups.end_all(EndReason.SHUTDOWN)
        self._welcomes.end_all(EndReason.SHUTDOWN)
        if self._control is not None:
            await self._control.stop(0)
            self._control = None
            control.release(str(self.control_socket))
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        if self._store is not None:
            self._store.close()
            self._store = None

    async def wait_for_termination(self) -> None:
        """Wait until the server stops."""
        if self._server is not None:
            await self._server.wait_for_termination()

    def _drop_streams(self, reason: EndReason = EndReason.DROPPED) -> int:
        return self._groups.end_all(reason) + self._welcomes.end_all(reason)

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


# Why a port cannot be listened on, when another process listens there.
_IN_USE: Final = "the port is in use"


def _unavailable(address: str, why: str) -> TargetError:
    return TargetError(
        f"cannot listen on {address}: {why} (is another devnet running there? "
        "pick another --port, or 0 for a free one)",
        reason="address_in_use" if why == _IN_USE else "target_error",
    )


def _port_in_use(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on, or None when it can. Asked before grpc
    binds, because grpc's refusal comes with C-core lines on stderr and advice about
    GRPC_VERBOSITY instead of a reason."""
    if port == 0:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As grpc binds: a port left in TIME_WAIT by a stopped node is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return _IN_USE
            return exc.strerror or str(exc)
    return None
