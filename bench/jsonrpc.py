"""JSON-RPC facade benchmarks, each against its baseline in the same run.

    python -m bench jsonrpc [--calls 2000] [--messages 10000] [--starts 15]

- identity: sequential `identity` round trips through `cone serve` relaying to a
  daemon, against direct gRPC calls on the same socket (goal: ≤ 1.5×); JSON-RPC
  straight on cone.sock for reference.
- drain: receive (limit 1000) + ack of N pending messages through `cone serve`,
  against the same loop over gRPC.
- cold start: `cone serve` in relay mode from exec to its first answer, against
  `python -c pass` (goal: < 200 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench import _prefill
from cone.devnet import Devnet
from support.daemons import DaemonProcess, short_home

IDENTITY = b'{"jsonrpc":"2.0","id":1,"method":"identity"}\n'


class Serve:
    """`cone serve` driven one request at a time."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.ids = 0

    @classmethod
    async def start(cls, home: Path, url: str) -> Serve:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cone", "serve", "--home", str(home), "--api-url", url,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )  # fmt: skip
        return cls(proc)

    async def call(self, method: str, params: object = None) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.ids += 1
        message: dict[str, object] = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        if params is not None:
            message["params"] = params
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        answer = json.loads(await self.proc.stdout.readline())
        assert answer["id"] == self.ids and "result" in answer, answer
        result: dict[str, object] = answer["result"]
        return result

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


def _ms(xs: list[float]) -> str:
    return f"p50 {statistics.median(xs) * 1e3:.3f} ms, mean {statistics.fmean(xs) * 1e3:.3f} ms"


async def bench_identity(d: DaemonProcess, url: str, n: int) -> None:
    serve = await Serve.start(d.home, url)
    for _ in range(100):  # warm up both paths
        await serve.call("identity")
        await d.client.identity()
    via_serve, direct, on_socket = [], [], []
    reader, writer = await asyncio.open_unix_connection(str(d.socket))
    for _ in range(n):
        t = time.perf_counter()
        await serve.call("identity")
        via_serve.append(time.perf_counter() - t)
        t = time.perf_counter()
        await d.client.identity()
        direct.append(time.perf_counter() - t)
        t = time.perf_counter()
        writer.write(IDENTITY)
        await reader.readline()
        on_socket.append(time.perf_counter() - t)
    writer.close()
    await serve.close()
    ratio = statistics.median(via_serve) / statistics.median(direct)
    print(f"identity x{n}: serve relay {_ms(via_serve)}; direct gRPC {_ms(direct)}; "
          f"JSON-RPC on cone.sock {_ms(on_socket)}; serve/gRPC p50 ratio {ratio:.2f}x")  # fmt: skip


async def bench_drain(url: str, n: int) -> None:
    home = short_home()
    async with DaemonProcess(home, url) as d:
        await d.stop()
        _prefill.fill_home(home, n)
        await d.start()
        serve = await Serve.start(home, url)
        await serve.call("identity")
        start = time.perf_counter()
        drained = 0
        while True:
            batch = await serve.call("receive", {"consumer": "serve", "limit": 1000})
            ids = [m["messageId"] for m in batch["messages"]]  # type: ignore[attr-defined]
            if not ids:
                break
            acked = await serve.call("ack", {"consumer": "serve", "messageIds": ids})
            drained += int(acked["acknowledged"])  # type: ignore[call-overload]
        via_serve = time.perf_counter() - start
        await serve.close()
        start = time.perf_counter()
        direct_drained = 0
        while True:
            got = await d.client.receive(consumer="grpc", limit=1000)
            if not got.messages:
                break
            direct_drained += await d.client.ack(
                [m.message_id for m in got.messages], consumer="grpc"
            )
        direct = time.perf_counter() - start
    assert drained == direct_drained == n
    print(f"drain {n} msgs (receive 1000 + ack): serve {n / via_serve:,.0f} msg/s "
          f"({via_serve:.2f} s); direct gRPC {n / direct:,.0f} msg/s ({direct:.2f} s); "
          f"ratio {via_serve / direct:.2f}x")  # fmt: skip


async def _first_answer(*argv: str) -> float:
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(IDENTITY)
    await proc.stdout.readline()
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    await proc.wait()
    return elapsed


async def bench_cold_start(d: DaemonProcess, url: str, n: int) -> None:
    serve = [sys.executable, "-m", "cone", "serve", "--home", str(d.home), "--api-url", url]
    baseline = [sys.executable, "-c", "import sys; sys.stdin.readline(); print('{}')"]
    starts, passes = [], []
    for _ in range(n):
        starts.append(await _first_answer(*serve))
        passes.append(await _first_answer(*baseline))
    print(f"cold start x{n}: cone serve (relay) to first answer p50 "
          f"{statistics.median(starts) * 1e3:.0f} ms (min {min(starts) * 1e3:.0f}); "
          f"python -c pass p50 {statistics.median(passes) * 1e3:.0f} ms; "
          f"overhead {(statistics.median(starts) - statistics.median(passes)) * 1e3:.0f} ms")  # fmt: skip


async def _main(args: argparse.Namespace) -> None:
    async with Devnet(port=0) as url:
        async with DaemonProcess(short_home(), url) as d:
            await bench_identity(d, url, args.calls)
            await bench_cold_start(d, url, args.starts)
        await bench_drain(url, args.messages)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench jsonrpc", description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--starts", type=int, default=15)
    asyncio.run(_main(parser.parse_args(argv)))
