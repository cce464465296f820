"""Fixtures shared by every test package."""

from __future__ import annotations

import shutil
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cone import _logs
from cone.devnet import Devnet
from support import peers
from support.daemons import short_home
from support.peers import Peer
from support.ports import fresh_port


def pytest_configure(config: pytest.Config) -> None:
    """Give this process SIGINT at its default (below), and route its native lines
    (libxmtp peers run in it, and libxmtp writes to stdout) through cone's log, as
    cone's own processes do: known-benign records such as `PoolNeedsConnection`
    while a closed peer's workers wind down are dropped, other records are one plain
    line each, pytest's own output passes unchanged. With fd capture (the default),
    pytest keeps the terminal's fd 1 aside and puts it back between tests; that saved
    fd becomes the pipe, so lines between tests and after the summary are routed too,
    and a test's captured output stays as it was."""
    # A suite started in the background by a non-interactive shell inherits SIGINT
    # ignored, and so would every command it starts (an ignored signal survives exec).
    # The tests that press Ctrl-C on a command expect what a terminal's foreground
    # job has: SIGINT at its default.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    capman = config.pluginmanager.getplugin("capturemanager")
    out = getattr(getattr(capman, "_global_capturing", None), "out", None)
    saved = getattr(out, "targetfd_save", None)
    _logs.route_native(saved if isinstance(saved, int) else 1)


#: What makes a test end to end: a fixture that starts a devnet (every peer and
#: daemon fixture depends on it), or a module that starts real processes.
_E2E_FIXTURES = frozenset({"devnet_node", "shared_devnet_node", "nats_server"})
_E2E_NAMES = (
    "DaemonProcess",
    "DevnetProcess",
    "ServeProcess",
    "run_cone",
    "cone_cli",
    "NodePeer",
    "HttpDaemon",
    "NatsServer",
    "chromium",
    "subprocess",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the end-to-end tier `e2e` (docs/development.md, "Tests in tiers"): the
    rest, logic on typed fakes and the store in process, is the fast tier
    (`pytest -m "not e2e"`). Tests marked `slow` go first: pytest-xdist hands tests
    out in this order, and a long one started last would hold the run's end."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        module = getattr(item, "module", None)
        if fixtures & _E2E_FIXTURES or any(hasattr(module, n) for n in _E2E_NAMES):
            item.add_marker(pytest.mark.e2e)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _close_peers() -> Iterator[None]:
    """Close every raw libxmtp peer a test made, once the test is over."""
    yield
    while peers.OPEN:
        peers.OPEN.pop().close()


@pytest.fixture
async def devnet_node() -> AsyncIterator[Devnet]:
    """An in-process devnet in memory on a port no earlier test used, started;
    `.faults` injects faults."""
    node = Devnet(port=fresh_port())
    async with node:
        yield node


@pytest.fixture
def devnet(devnet_node: Devnet) -> str:
    """The URL of an in-process devnet (`http://127.0.0.1:PORT`)."""
    return devnet_node.url


@pytest.fixture
async def alice(devnet: str, tmp_path: Path) -> Peer:
    """A raw libxmtp peer on the devnet."""
    return await Peer.create(devnet, tmp_path, "alice")


@pytest.fixture
def home() -> Iterator[Path]:
    """A fresh state directory with a short path (Unix socket paths are ≤107 bytes)."""
    path = short_home()
    yield path
    shutil.rmtree(path, ignore_errors=True)
