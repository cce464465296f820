"""One devnet, and one daemon per backend, shared by a module's tests.

A daemon's start is most of a short test's time (about 2 s: a process, libxmtp's
client, its streams). A module whose tests need a daemon but not a fresh one opts in:

    from support.shared import *  # noqa: F403 (the fixtures that share a devnet and daemons)

    pytestmark = pytest.mark.asyncio(loop_scope="module")

Its tests then run in one event loop. Each still gets its own peers (`alice` is
new for each test), so its conversations are its own; the daemon is started once
per backend, started again if a test left it killed, and the devnet's faults are
cleared after each test. What a test keeps must not collide with another's on the
daemon: its send keys are its own, and what it leaves pending it does not read as
its own (a new peer's conversation, a consumer of its own). A test that damages the
daemon's state directory takes `own_daemon` instead. A module whose daemons need an
environment of their own (a shortened bound) overrides the `daemon_env` fixture.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from cone.devnet import Devnet
from cone.errors import ConeError
from support.daemons import DaemonProcess, short_home
from support.peers import Peer
from support.ports import fresh_port
from support.waiting import until

#: How long a test's leftover sends get to settle before the next test.
SETTLE_S = 30.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_devnet_node() -> AsyncIterator[Devnet]:
    """An in-process devnet for the whole module."""
    node = Devnet(port=fresh_port())
    async with node:
        yield node


@pytest.fixture
def devnet_node(shared_devnet_node: Devnet) -> Iterator[Devnet]:
    """The module's devnet, its faults cleared after the test."""
    yield shared_devnet_node
    shared_devnet_node.faults.clear()


class Daemons:
    """The module's daemons, one per backend, started on first use."""

    def __init__(self, url: str, env: dict[str, str] | None = None) -> None:
        self._url = url
        self._env = env or {}
        self._started: dict[str, tuple[DaemonProcess, dict[str, str]]] = {}
        self._homes: list[Path] = []

    async def get(self, backend: str) -> DaemonProcess:
        """The backend's daemon, running, with the environment it started with."""
        if backend not in self._started:
            home = short_home()
            self._homes.append(home)
            gateway = self._url if backend == "d14n" else None
            daemon = DaemonProcess(home, self._url, self._env, gateway_url=gateway)
            self._started[backend] = (daemon, dict(daemon.env))
            await daemon.start()
            return daemon
        daemon, env = self._started[backend]
        daemon.env = dict(env)  # a failpoint a test set is not the next one's
        if daemon.proc is None or daemon.proc.poll() is not None:
            await daemon.restart()  # a test killed it and did not start it again
        return daemon

    async def close(self) -> None:
        for daemon, _ in self._started.values():
            await daemon.__aexit__(None, None, None)
        for home in self._homes:
            shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon_env() -> dict[str, str]:
    """What the module's daemons add to the environment (none unless it overrides this)."""
    return {}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemons(shared_devnet_node: Devnet, daemon_env: dict[str, str]) -> AsyncIterator[Daemons]:
    """The module's daemons, stopped at its end."""
    pool = Daemons(shared_devnet_node.url, daemon_env)
    try:
        yield pool
    finally:
        await pool.close()


@pytest_asyncio.fixture(loop_scope="module")
async def daemon(
    daemons: Daemons, backend: str, shared_devnet_node: Devnet
) -> AsyncIterator[DaemonProcess]:
    """The module's running daemon on the test's backend. After the test, with the
    faults cleared, what it left pending is acknowledged and its outbox settles
    (bounded: a test that failed may leave a key that never will)."""
    running = await daemons.get(backend)
    yield running
    shared_devnet_node.faults.clear()
    if running.proc is None or running.proc.poll() is not None:
        return
    try:
        await _left_clean(running)
    except (ConeError, TimeoutError):
        pass


async def _left_clean(daemon: DaemonProcess) -> None:
    while pending := (await daemon.client.receive(limit=1000)).messages:
        await daemon.client.ack([m.message_id for m in pending])

    async def settled() -> bool:
        return not (await daemon.status()).outbox

    await until(settled, timeout=SETTLE_S)


@pytest_asyncio.fixture(loop_scope="module")
async def own_daemon(shared_devnet_node: Devnet) -> AsyncIterator[DaemonProcess]:
    """A daemon of the test's own on the module's devnet, for a test that damages its
    state directory."""
    home = short_home()
    try:
        async with DaemonProcess(home, shared_devnet_node.url) as started:
            yield started
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest_asyncio.fixture(loop_scope="module")
async def alice(devnet: str, tmp_path: Path, backend: str) -> Peer:
    """A new raw libxmtp peer on the module's devnet, on the daemon's backend."""
    return await Peer.create(devnet, tmp_path, "alice", d14n=backend == "d14n")


__all__ = [
    "alice",
    "daemon",
    "daemon_env",
    "daemons",
    "devnet_node",
    "own_daemon",
    "shared_devnet_node",
]
