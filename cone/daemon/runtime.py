"""Starting and stopping the core for one state directory.

`running_core(settings)` is the one way to host the core: `cone daemon` uses it, and
so do `cone serve`, `cone mcp` and `cone bridge` when no other process holds the
identity. In order, it: takes the state lock; makes the state directory private;
opens the store with its key (its page-by-page check then runs beside the rest:
damage it finds stops the host, exit 6); loads or creates the identity
(installation safety first); opens libxmtp; starts the streams, then syncs; and
serves ConeService, gRPC health and reflection on `cone.sock`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket as socketlib
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from cone import _failpoints, _heap
from cone._fs import make_private, private_dir, refuse_link
from cone._shutdown import request_stop
from cone.config import Paths, Settings, secret
from cone.core.service import BACKEND_KEY, Core
from cone.daemon import reflection
from cone.daemon.edge import EdgeServer
from cone.daemon.in_process import InProcess
from cone.daemon.lock import StateLock
from cone.daemon.servicer import ConeServicer
from cone.daemon.socket_front import JsonHandler, SocketFront
from cone.engine import _client
from cone.engine.engine import Engine
from cone.errors import NoIdentity, StateError, Unavailable
from cone.facades.http.options import HttpOptions
from cone.jetstream import state as jetstream_state
from cone.store import Connection, PageCheck, Store, load_db_key, meta, xmtp_database
from cone.store.keys import KEY_ENV, parse_hex_key
from conepb.v1 import cone_pb2, cone_pb2_grpc

log = logging.getLogger(__name__)

GRPC_SOCKET_NAME = "cone.grpc.sock"
# The gRPC server's own socket has no peer-credential check (cone.sock has, and relays
# to it): it lives in a directory only the owner can enter, made 0700 at every start.
INTERNAL_DIR_NAME = ".internal"
SERVICE_NAME = cone_pb2.DESCRIPTOR.services_by_name["ConeService"].full_name
# Far above any request (a send is at most 512 KiB) and any receive batch (bounded by
# cone.limits.RECEIVE_BATCH_BYTES, or one message of MESSAGE_MAX_BYTES: about 1 MiB).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# The files cone opens in the state directory: none of them may be a symbolic link.
STATE_FILES = (
    "db.key",
    "cone.db",
    "cone.db-wal",
    "cone.db-shm",
    "xmtp.db3",
    "xmtp.db3-wal",
    "xmtp.db3-shm",
    "xmtp.db3.sqlcipher_salt",
)


@dataclass
class Running:
    """A running core, as handed to whoever hosts it."""

    core: Core
    socket: Path
    #: ConeService called in this process (the host's own calls need no socket).
    calls: InProcess
    #: Whether this start registered a new identity (a new wallet, or one a start
    #: that could not reach the node left unregistered).
    created: bool = False


def _private_dir(home: Path) -> None:
    private_dir(home)
    st = home.stat()
    if st.st_uid != os.getuid():
        raise StateError(f"{home} belongs to another user", reason="bad_permissions")
    if st.st_mode & 0o077:
        os.chmod(home, 0o700)


def _internal_dir(home: Path) -> Path:
    internal = home / INTERNAL_DIR_NAME
    refuse_link(internal)
    old = os.umask(0o077)
    try:
        internal.mkdir(mode=0o700, exist_ok=True)
    finally:
        os.umask(old)
    st = internal.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise StateError(f"{internal} is not a directory of this user", reason="bad_permissions")
    os.chmod(internal, 0o700)
    return internal


def _check_salt(xmtp_db: Path) -> None:
    salt = Path(f"{xmtp_db}.sqlcipher_salt")
    if xmtp_db.exists() and not salt.exists():
        raise StateError(
            f"{salt} is missing: libxmtp's database cannot be decrypted without it. Restore "
            "the identity from a backup (cone restore FILE --home NEW_HOME) and start there",
            reason="corrupt_database",
        )


def _wallet_key_from(settings: Settings) -> bytes | None:
    raw: str | None = None
    if settings.wallet_key_file is not None:
        raw = settings.wallet_key_file.read_text()
    else:
        raw = secret("CONE_WALLET_KEY") or None
    if raw is None:
        return None
    return parse_hex_key(raw, "the wallet key", reason="state_error")


def _put_identity_keys(conn: Connection, wallet: bytes, xmtp_key: bytes) -> None:
    # One transaction: a crash never leaves a wallet without libxmtp's database key.
    meta.put(conn, "wallet_key", wallet)
    meta.put(conn, "xmtp_db_key", xmtp_key)


async def _open_identity(settings: Settings, store: Store, *, create: bool) -> tuple[Engine, bool]:
    """libxmtp opened on the store's identity; True when it was registered now.

    An identity is complete once libxmtp's installation id is recorded (after the node
    registered it). Until then the store holds only the wallet key: `create` registers
    it (the same wallet each time, so a retry after a lost answer finds the same
    inbox); without `create` it counts as no identity at all (NoIdentity).
    """
    paths = settings.paths
    wallet = await store.read(meta.get, "wallet_key")
    xmtp_key = await store.read(meta.get, "xmtp_db_key")
    if not create and (wallet is None or await store.read(meta.get, "installation_id") is None):
        raise NoIdentity.of(paths.home)
    if wallet is None:
        if paths.xmtp_db.exists():
            raise StateError(
                f"{paths.xmtp_db} exists but the store holds no identity: refusing to mix "
                "identities; use an empty state directory",
                reason="installation_mismatch",
            )
        imported = _wallet_key_from(settings)
        wallet = imported or _client.generate_wallet_key()
        xmtp_key = secrets.token_bytes(32)
        await store.write(_put_identity_keys, wallet, xmtp_key)
        new = True
    else:
        imported = _wallet_key_from(settings)
        if imported is not None and imported != wallet:
            raise StateError(
                "the wallet key given does not match this state directory's identity",
                reason="state_error",
            )
        registered = await store.read(meta.get, "installation_id")
        if registered is not None and not paths.xmtp_db.exists():
            raise StateError(
                f"libxmtp's database {paths.xmtp_db} is missing: starting would create a new "
                "XMTP installation (10 per inbox). Restore it from a backup, or use a new "
                "state directory.",
                reason="installation_mismatch",
            )
        new = registered is None
    assert xmtp_key is not None
    _check_salt(paths.xmtp_db)
    gateway_url = settings.gateway_url
    if gateway_url is None and await store.read(meta.get, BACKEND_KEY) == b"d14n":
        # This identity moved to D14N at its node's cutover: start there at once.
        gateway_url = settings.cutover_gateway
        if gateway_url is None:
            log.error(
                "this identity moved to D14N at its node's cutover, but no gateway is known "
                "for network %s: it starts on V3, which refuses its sends; give "
                "--gateway-url (CONE_GATEWAY_URL) (docs/networks.md)",
                settings.network,
            )
    try:
        engine = await Engine.open(
            api_url=settings.api_url,
            gateway_url=gateway_url,
            cutover_gateway=settings.cutover_gateway,
            db_path=str(paths.xmtp_db),
            db_key=xmtp_key,
            wallet_key=wallet,
            new=new,
            child=xmtp_database,
        )
    except Unavailable as exc:
        # Only a new identity needs the node to start (a registered one opens offline).
        log.debug("registering a new identity: %s", exc.message)
        hint = (
            "is `cone devnet` running there?"
            if settings.network == "local"
            else "check the URL and this machine's connection."
        )
        if settings.gateway_url:
            where, flags = f"gateway at {settings.gateway_url}", "--gateway-url chooses the gateway"
        else:
            where, flags = f"node at {settings.api_url}", "--network and --api-url choose the node"
        raise Unavailable(
            f"cannot reach the XMTP {where} to register this new identity: {hint} ({flags})"
        ) from exc
    recorded = await store.read(meta.get, "installation_id")
    if recorded is None:
        await store.write(meta.put, "installation_id", engine.installation_id.encode())
    elif recorded.decode() != engine.installation_id:
        await engine.close()
        raise StateError(
            "libxmtp opened a different installation than this state directory recorded",
            reason="installation_mismatch",
        )
    for side in paths.home.iterdir():
        make_private(side)  # never through a link: its target may be anywhere
    return engine, recorded is None


def _grpc_server(
    core: Core, grpc_socket: Path
) -> tuple[grpc.aio.Server, health.aio.HealthServicer, InProcess]:
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
    )
    # No interceptors: every handler is registered with its checks and metrics
    # built in (cone/daemon/edge.py), once, instead of rebuilt on every call.
    edged = EdgeServer(server)
    cone_pb2_grpc.add_ConeServiceServicer_to_server(
        ConeServicer(core, jetstream_status=jetstream_state.status_pb), edged
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, edged)
    reflection.enable([SERVICE_NAME, health.SERVICE_NAME], edged)
    server.add_insecure_port(f"unix:{grpc_socket}")
    return server, health_servicer, InProcess(edged.cone_unary)


def _key_source_said(exc: StateError, settings: Settings) -> StateError:
    """A wrong key's error, saying which source the key came from when that is not
    the state directory's own db.key (the environment wins over every file)."""
    if exc.reason != "wrong_key":
        return exc
    if secret(KEY_ENV):
        exc.message += (
            f" ({KEY_ENV} is set: it overrides {settings.paths.default_key_file}; "
            f"unset {KEY_ENV} to use that file)"
        )
    elif settings.key_file is not None:
        exc.message += f" (the key came from --key-file {settings.key_file})"
    return exc


def _http_port(http: HttpOptions | None) -> socketlib.socket | None:
    """The HTTP front's port, taken before anything of the identity is made: a busy
    port fails (`address_in_use`) leaving a fresh home as it was."""
    if http is None:
        return None
    from cone.facades.http.server import bind

    return bind(http)


@asynccontextmanager
async def _http_front(
    http: HttpOptions | None, sock: socketlib.socket | None, home: Path, caller: InProcess
) -> AsyncIterator[None]:
    if http is None or sock is None:
        yield
        return
    from cone.facades.http.server import serving

    async with serving(http, home, caller, sock=sock):
        yield


#: Makes the JSON-RPC handler of `cone.sock` from the calls into this process's core
#: (cone.facades.jsonrpc's `JsonRpcOnSocket`: the daemon does not import the facade).
JsonRpc = Callable[[InProcess], JsonHandler]


@asynccontextmanager
async def running_core(
    settings: Settings,
    *,
    json_rpc: JsonRpc | None = None,
    create: bool = True,
    http: HttpOptions | None = None,
) -> AsyncIterator[Running]:
    """Host the core for `settings` until the block exits. Without `create`, a state
    directory without a registered identity raises NoIdentity and is left as it was.
    With `json_rpc`, `cone.sock` serves JSON-RPC clients too.
    With `http`, the HTTP front (cone.facades.http) runs too, started after `cone.sock`
    and stopped before it."""
    paths = settings.paths
    if not create and not paths.store.exists():
        raise NoIdentity.of(paths.home)
    http_sock = _http_port(http)
    try:
        async with _hosting(settings, paths, json_rpc, create, http, http_sock) as running:
            yield running
    finally:
        if http_sock is not None:
            http_sock.close()  # the front's own close, or never served


@asynccontextmanager
async def _hosting(
    settings: Settings,
    paths: Paths,
    json_rpc: JsonRpc | None,
    create: bool,
    http: HttpOptions | None,
    http_sock: socketlib.socket | None,
) -> AsyncIterator[Running]:
    _private_dir(paths.home)
    lock = StateLock(paths.lock)
    lock.acquire()
    try:
        for name in STATE_FILES:
            refuse_link(paths.home / name)
        key = load_db_key(
            key_file=settings.key_file,
            default_key_file=paths.default_key_file,
            store_exists=paths.store.exists(),
        )
        try:
            store = Store.open(paths.store, key)
        except StateError as exc:
            raise _key_source_said(exc, settings) from exc
        # The store's page-by-page check runs beside the start and the calls, not
        # before them (cone/store/_check.py): its damage stops the host.
        pages = PageCheck(paths.store, key)
        checking = asyncio.create_task(_check_pages(pages))
        try:
            engine, created = await _open_identity(settings, store, create=create)
            core = Core(
                store,
                engine,
                settings.network,
                paths.xmtp_db,
                settings.catchup_interval_s,
                settings.request_budget,
            )
            await core.start()
            grpc_socket = _internal_dir(paths.home) / GRPC_SOCKET_NAME
            grpc_socket.unlink(missing_ok=True)
            old = os.umask(0o177)
            try:
                server, health_servicer, in_process = _grpc_server(core, grpc_socket)
                await server.start()
            finally:
                os.umask(old)
            grpc_socket.chmod(0o600)
            await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
            # Before the first call can arrive (cone.sock does not listen yet): what lives
            # now lives on, out of the garbage collector's full walks (cone/_heap.py).
            _heap.settle()
            json_handler = json_rpc(in_process) if json_rpc is not None else None
            front = SocketFront(paths.socket, grpc_socket, json_handler, settings.preface_timeout_s)
            await front.start()
            try:
                async with _http_front(http, http_sock, paths.home, in_process):
                    yield Running(core, paths.socket, in_process, created)
            finally:
                _heap.release()
                await front.close()
                await in_process.close()
                await server.stop(grace=1.0)
                grpc_socket.unlink(missing_ok=True)
                await core.stop()
        finally:
            checking.cancel()
            pages.stop()
            store.close()
            if pages.damage is not None:
                # In place of whatever ended the host: a stop it asked for, a start
                # cancelled by it, or a read that met the same damage.
                raise pages.damage
    finally:
        lock.release()


async def _check_pages(pages: PageCheck) -> None:
    """Check the store page by page; when it is damaged, say so and stop the host (its
    exit then raises the damage, as a start refused for it would: exit 6)."""
    await _failpoints.reached("page_check")
    damage = await pages.run()
    if damage is not None:
        log.error("%s", damage.message)
        request_stop("cone's store is damaged", damage.exit_code)
