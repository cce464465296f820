"""Start-up in one place: how every `cone` command finds the core, or hosts it.

Each entry point (the operator's commands, `cone daemon`, `serve`, `mcp`, `bridge`,
`backup`) resolves its `Settings` here (`settings_from`) and reaches the core here:

- When another process (a daemon, a bridge, a facade) holds the state lock, calls go
  to its `cone.sock` (`reach_core` relays).
- Otherwise the core starts in this process (`cone.daemon.runtime.running_core`),
  takes the lock and serves `cone.sock` (gRPC, and JSON-RPC through the facades) so
  that others can relay to it; this process's own calls run the same handlers in
  process (`cone.daemon.in_process`). Leaving the block stops the core and releases
  the lock.

The identity gate lives here too: only `cone init` and the long-running hosts
(`create=True`) may create an identity; every other command given a state directory
without one fails with `NoIdentity` (exit 7) before anything is written there. A
host that creates one says so in one line on stderr (`announce_created`).

Settings walk down from here (into `cone.daemon.runtime`, the facades' relay), never
back up: nothing below imports this module.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cone.config import Settings
from cone.daemon.lock import StateLock
from cone.errors import ConeError, NoIdentity, StateError, Unavailable
from cone.facades._pool import ChannelPool

if TYPE_CHECKING:
    from cone.daemon.runtime import JsonRpc, Running
    from cone.facades.http.options import HttpOptions
    from cone.facades.jsonrpc import Caller

log = logging.getLogger(__name__)

# How long a relay waits for the holder's socket to come up (a daemon that has just
# taken the lock is still opening the identity).
SOCKET_WAIT_S = 30.0


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the common state/network flags (`--home`, `--network`, ...), their
    state directory one that can be (StateError in words when a file is in the way)."""
    settings = Settings.resolve(
        home=args.home,
        network=args.network,
        api_url=args.api_url,
        gateway_url=getattr(args, "gateway_url", None),
        key_file=args.key_file,
        wallet_key_file=getattr(args, "wallet_key_file", None),
    )
    _check_home(settings.paths.home)
    return settings


def _check_home(home: Path) -> None:
    """StateError when a file stands at `home` or at a directory above it (a missing
    directory is fine: `cone init` and the hosts make it)."""
    for path in (home, *home.parents):
        if not os.path.lexists(path):
            continue
        if path.is_dir():
            return
        if path == home:
            what = f"{home} is a file, not a directory"
        else:
            what = f"{home} cannot be a directory: {path} is a file"
        raise StateError(
            f"{what}; --home (or CONE_HOME) names cone's state directory: give a directory, "
            "or a path where `cone init` can make one"
        )


def held_by_other(settings: Settings) -> bool:
    """Whether another process holds the identity now."""
    return StateLock(settings.paths.lock).held_by_other()


def require_identity(settings: Settings) -> None:
    """NoIdentity unless the state directory has an identity or a process holds it.

    Reads only: a typo in `--home` must not leave a directory behind. (A store whose
    identity was never registered is caught when the core opens it.)
    """
    if held_by_other(settings) or settings.paths.store.exists():
        return
    raise NoIdentity.of(settings.paths.home)


def announce_created(command: str, running: Running) -> None:
    """The one stderr line a long-running host prints when it made a new identity."""
    if running.created:
        ident = running.core.status.identity()
        print(
            f"cone {command}: created a new identity {ident.address} in "
            f"{running.socket.parent} (registered on {ident.network})",
            file=sys.stderr,
            flush=True,
        )


@asynccontextmanager
async def host_core(
    settings: Settings,
    *,
    create: bool,
    json_rpc: JsonRpc | None = None,
    announce: str | None = None,
    http: HttpOptions | None = None,
) -> AsyncIterator[Running]:
    """Host the core here (`running_core`); with `announce`, say so when it is new;
    with `http`, serve the HTTP front too (cone.facades.http)."""
    from cone.daemon.runtime import running_core

    async with running_core(settings, json_rpc=json_rpc, create=create, http=http) as running:
        if announce:
            announce_created(announce, running)
        yield running


@dataclass(frozen=True)
class Reached:
    """How this process reaches the core; `created` when it registered a new identity."""

    #: Where calls go: the holder's socket, or this process's core.
    calls: Caller
    embedded: bool
    created: bool = False


async def _socket_up(settings: Settings, timeout: float = SOCKET_WAIT_S) -> None:
    """Wait until the holder's socket accepts connections (at once, normally)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_unix_connection(str(settings.paths.socket))
        except OSError:
            if time.monotonic() > deadline or not held_by_other(settings):
                return  # calls will say daemon_unavailable
            await asyncio.sleep(0.05)
        else:
            writer.close()
            return


@asynccontextmanager
async def reach_core(
    settings: Settings,
    *,
    create: bool,
    announce: str | None = None,
    http: HttpOptions | None = None,
) -> AsyncIterator[Reached]:
    """Relay or embed, as the state lock says; see the module docstring. Without
    `create`, a state directory without an identity raises NoIdentity. `http` is served
    only when this process hosts the core (the HTTP front lives beside the core)."""
    if not create:
        require_identity(settings)
    async with ChannelPool(settings.paths.socket) as pool:
        if held_by_other(settings):
            log.info("relaying to %s", settings.paths.socket)
            _no_http_when_relaying(http)
            await _socket_up(settings)
            yield Reached(pool, embedded=False)
            return
        from cone.facades.jsonrpc import JsonRpcOnSocket

        stack = AsyncExitStack()
        try:
            running = await stack.enter_async_context(
                host_core(
                    settings,
                    create=create,
                    json_rpc=JsonRpcOnSocket,
                    announce=announce,
                    http=http,
                )
            )
        except StateError as err:
            if err.reason != "locked":
                raise
            log.info("another process took the identity first; relaying to it")
            _no_http_when_relaying(http)
            await _socket_up(settings)
            yield Reached(pool, embedded=False)
            return
        async with stack:
            log.info("hosting the core on %s", settings.paths.socket)
            if announce is None:
                # A one-shot command (every host but the announced long-running ones:
                # serve, mcp, bridge) answers after the start's read and first sync, as
                # before, and stops with nothing of the start in flight; a long-running
                # host answers from the store meanwhile.
                await running.core.started()
            yield Reached(running.calls, embedded=True, created=running.created)


def _no_http_when_relaying(http: HttpOptions | None) -> None:
    if http is not None:
        log.warning(
            "--http is not served: another process holds the identity and this one relays "
            "to it; give --http to the process that holds it (docs/http.md)"
        )


class CoreNotStarted(Unavailable):
    """Every call's answer when the core could not be reached: `daemon_unavailable`,
    with the start failure's own reason as `cause` in the error data."""

    def __init__(self, failure: ConeError) -> None:
        super().__init__(
            f"the core could not start ({failure.reason}): {failure.message}",
            reason="daemon_unavailable",
        )
        self.failure = failure

    def data(self) -> dict[str, object]:
        return {**super().data(), "cause": self.failure.reason}


class LateCore:
    """A Caller whose calls wait until the core is reached, or fail as reaching it did."""

    def __init__(self) -> None:
        self._pool: asyncio.Future[Caller] = asyncio.get_running_loop().create_future()
        self.failure: ConeError | None = None

    async def call(
        self, rpc: str, request: Any, timeout: float | None = None, *, long_poll: bool = False
    ) -> Any:
        """Call `rpc` once the core is there; CoreNotStarted if it never will be."""
        pool = await asyncio.shield(self._pool)
        return await pool.call(rpc, request, timeout, long_poll=long_poll)

    def _reached(self, pool: Caller) -> None:
        self._pool.set_result(pool)

    def _failed(self, failure: ConeError, *, fatal: bool = True) -> None:
        if not self._pool.done():
            if fatal:
                self.failure = failure  # a start failure: the command's exit code
            self._pool.set_exception(CoreNotStarted(failure))
            self._pool.exception()  # retrieved: no warning when no call ever waited


@asynccontextmanager
async def core_in_background(
    settings: Settings,
    stop: asyncio.Event,
    *,
    end_on_failure: bool,
    command: str,
    http: HttpOptions | None = None,
) -> AsyncIterator[LateCore]:
    """Reach the core (`reach_core`, which may create the identity: these are
    long-running hosts) while the block already serves its stdio.

    Requests read meanwhile wait for the core. If it cannot start, each is answered
    with CoreNotStarted, and with `end_on_failure` `stop` is set (the input ends as
    on a signal; otherwise later requests get the same answer until the input ends);
    the start failure is raised when the block ends (its exit code). `stop` set before the
    core is reached cancels the start.
    """
    late = LateCore()
    done = asyncio.Event()

    async def hold() -> None:
        try:
            async with reach_core(settings, create=True, announce=command, http=http) as reached:
                late._reached(reached.calls)
                await done.wait()
        except ConeError as err:
            late._failed(err)
            if end_on_failure:
                stop.set()  # the input ends: what was read is answered, then the exit
        finally:
            # Cancelled (a stop, or input ended first), or an unexpected failure.
            late._failed(
                Unavailable("the core is stopping", reason="daemon_unavailable"), fatal=False
            )

    holder = asyncio.create_task(hold(), name="core")
    stopper = asyncio.create_task(stop.wait())
    stopper.add_done_callback(lambda _: None if late._pool.done() else holder.cancel())
    try:
        yield late
    finally:
        stopper.cancel()
        if not late._pool.done():
            holder.cancel()  # nobody waits for a start any more
        done.set()
        await asyncio.gather(holder, stopper, return_exceptions=True)
    if late.failure is not None:
        raise late.failure


__all__ = [
    "CoreNotStarted",
    "LateCore",
    "Reached",
    "announce_created",
    "core_in_background",
    "held_by_other",
    "host_core",
    "reach_core",
    "require_identity",
    "settings_from",
]
