"""MCP facade benchmark: a `cone_identity` tool call through `cone mcp` against the same
call through `cone serve`, both relaying to one daemon, in the same run (goal: ≤ 2×).

    python -m bench mcp [--calls 1000]

Both are driven with raw JSON lines over pipes, so the client costs the same; the
SDK's own client is timed too, for reference (what an MCP host adds).
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

from facades._mcp import mcp_session

from cone.devnet import Devnet
from support.daemons import DaemonProcess, short_home

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


async def _lines(argv: list[str], setup: list[bytes], request: bytes, n: int) -> list[float]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    for line in setup:
        proc.stdin.write(line)
        if b'"id"' in line:
            await proc.stdout.readline()
    times = []
    for i in range(n + 100):
        t = time.perf_counter()
        proc.stdin.write(request)
        answer = json.loads(await proc.stdout.readline())
        assert "result" in answer and not answer["result"].get("isError"), answer
        if i >= 100:  # the first 100 warm up
            times.append(time.perf_counter() - t)
    proc.stdin.close()
    await proc.wait()
    return times


def _ms(xs: list[float]) -> str:
    return f"p50 {statistics.median(xs) * 1e3:.3f} ms, mean {statistics.fmean(xs) * 1e3:.3f} ms"


async def _main(args: argparse.Namespace) -> None:
    async with Devnet(port=0) as url, DaemonProcess(short_home(), url) as d:
        state = ["--home", str(d.home), "--api-url", url]
        serve = await _lines(
            [sys.executable, "-m", "cone", "serve", *state], [],
            b'{"jsonrpc":"2.0","id":1,"method":"identity"}\n', args.calls,
        )  # fmt: skip
        mcp = await _lines(
            [sys.executable, "-m", "cone", "mcp", *state],
            [json.dumps(INITIALIZE).encode() + b"\n",
             b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'],
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
            b'"params":{"name":"cone_identity","arguments":{}}}\n',
            args.calls,
        )  # fmt: skip
        sdk = []
        async with mcp_session(d.home, url) as session:
            for i in range(args.calls // 4 + 50):
                t = time.perf_counter()
                await session.call_tool("cone_identity", {})
                if i >= 50:
                    sdk.append(time.perf_counter() - t)
    ratio = statistics.median(mcp) / statistics.median(serve)
    print(f"identity x{args.calls}: cone mcp tools/call {_ms(mcp)}; cone serve {_ms(serve)}; "
          f"mcp/serve p50 ratio {ratio:.2f}x; through the SDK's client x{len(sdk)}: {_ms(sdk)}")  # fmt: skip


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench mcp", description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    asyncio.run(_main(parser.parse_args(argv)))
