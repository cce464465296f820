"""Real NATS servers with JetStream for tests: the distribution's `nats-server`, on
loopback ports chosen free, each with a store directory of its own.

    async with NatsServer.start(tmp_path) as server:
        nc = await nats.connect(server.url)

`NatsCluster.start(tmp_path, 3)` starts three routed nodes (a JetStream meta group of
three); `kill9`/`restart` crash and bring back one node by its own pid.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

import nats
import pytest

from support.ports import fresh_port

START_S = 30.0


def need_nats_server() -> str:
    """The nats-server binary, or skip (saying so) where it is not installed."""
    binary = shutil.which("nats-server")
    if binary is None:
        pytest.skip("nats-server is not installed (apt-get install nats-server; .ci/run does)")
    return binary


class NatsServer:
    """One nats-server process with JetStream."""

    def __init__(
        self,
        store: Path,
        *,
        name: str = "n1",
        cluster: str | None = None,
        cluster_port: int = 0,
        routes: list[int] | None = None,
        extra: list[str] | None = None,
        user: str | None = None,
        password: str | None = None,
    ) -> None:
        """`user` and `password`: the server requires them (they go in `url`)."""
        self.binary = need_nats_server()
        self.store = store
        self.name = name
        self.port = fresh_port()
        self.cluster = cluster
        self.cluster_port = cluster_port
        self.routes = routes or []
        self.extra = extra or []
        if user is not None and password is not None:
            self.extra += ["--user", user, "--pass", password]
        self.auth = f"{user}:{password}@" if user is not None else ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tempfile.TemporaryFile()

    @property
    def url(self) -> str:
        """The client URL, credentials included."""
        return f"nats://{self.auth}127.0.0.1:{self.port}"

    @property
    def shown(self) -> str:
        """The URL without credentials (as cone shows it)."""
        return f"nats://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        args = [
            self.binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store),
            "--server_name", self.name, *self.extra,
        ]  # fmt: skip
        if self.cluster:
            args += [
                "--cluster_name",
                self.cluster,
                "--cluster",
                f"nats://127.0.0.1:{self.cluster_port}",
            ]
            routes = ",".join(f"nats://127.0.0.1:{p}" for p in self.routes)
            args += ["--routes", routes]
        return args

    async def start(self) -> NatsServer:
        """Start the process; wait until it accepts clients (JetStream may still be
        electing its leader in a cluster: `ready` waits for that)."""
        self.store.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(  # noqa: ASYNC220
            self.command(), stdout=self.log, stderr=self.log
        )
        async with asyncio.timeout(START_S):
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"nats-server exited: {self.output()}")
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                await writer.wait_closed()
                return self

    async def ready(self) -> None:
        """Wait until JetStream answers through this server."""
        nc = await nats.connect(self.url)
        try:
            async with asyncio.timeout(START_S):
                while True:
                    try:
                        await nc.jetstream().account_info()
                        return
                    except (nats.errors.Error, TimeoutError):
                        await asyncio.sleep(0.2)
        finally:
            await nc.close()

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def kill9(self) -> None:
        """SIGKILL this server (a crash)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    async def stop(self) -> None:
        """Stop this server by its pid, SIGKILL after a bound."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.proc.wait, 15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            await loop.run_in_executor(None, self.proc.wait)

    async def __aenter__(self) -> NatsServer:
        try:
            await self.start()
            await self.ready()
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)  # no leaked process or log
            raise
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
        self.log.close()


class NatsCluster:
    """Routed nats-servers with JetStream (a meta group of `size`)."""

    def __init__(self, root: Path, size: int = 3) -> None:
        cports = [fresh_port() for _ in range(size)]
        self.nodes = [
            NatsServer(
                root / f"n{i}",
                name=f"n{i}",
                cluster="cone-test",
                cluster_port=cports[i],
                routes=[p for j, p in enumerate(cports) if j != i],
            )
            for i in range(size)
        ]

    @property
    def url(self) -> str:
        """Every node's URL, comma-separated (a client's seeds)."""
        return ",".join(n.url for n in self.nodes)

    async def __aenter__(self) -> NatsCluster:
        for node in self.nodes:
            await node.start()
        await self.nodes[0].ready()
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        for node in self.nodes:
            await node.stop()
            node.log.close()
