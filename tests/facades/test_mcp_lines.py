"""`cone mcp` answers every line that carries an id, whatever the line holds."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "raw-lines", "version": "1"},
    },
}


async def _answers(proc: asyncio.subprocess.Process, count: int) -> list[Any]:
    assert proc.stdout is not None
    out = []
    async with asyncio.timeout(60):
        while len(out) < count:
            out.append(json.loads(await proc.stdout.readline()))
    return out


async def test_every_line_with_an_id_gets_an_answer(home: Path, devnet: str) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.startswith(("CONE_", "PYTHON", "VIRTUAL_ENV", "PATH", "HOME"))
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", "mcp", "--home", str(home), "--api-url", devnet,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stdin is not None
    try:
        lines = [
            json.dumps(INIT),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            "this is not json",
            json.dumps({"jsonrpc": "2.0", "id": 7, "method": 5}),
            json.dumps({"jsonrpc": "2.0", "id": "x", "params": {}}),
            json.dumps({"jsonrpc": "2.0", "method": 5}),  # a broken notification: no answer
            json.dumps(
                [
                    {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
                    {"jsonrpc": "2.0", "method": "notifications/progress"},
                ]
            ),
            "[]",
            json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
        ]
        proc.stdin.write("".join(line + "\n" for line in lines).encode())
        await proc.stdin.drain()
        answers = await _answers(proc, 7)
        batches = [a for a in answers if isinstance(a, list)]
        singles = {json.dumps(a.get("id")): a for a in answers if isinstance(a, dict)}
        without_id = [
            a["error"]["code"] for a in answers if isinstance(a, dict) and a["id"] is None
        ]
        assert without_id == [-32700, -32600]  # the line that is not JSON; the empty batch
        assert singles["0"]["result"]["serverInfo"]
        assert singles["7"]["error"]["code"] == -32600
        assert singles['"x"']["error"]["code"] == -32600
        assert "tools" in singles["9"]["result"]
        (batch,) = batches
        assert [(a["id"], a["error"]["code"]) for a in batch] == [(8, -32600)]
        assert "each request on its own line" in batch[0]["error"]["message"]
        # Exactly these: the broken notification got nothing.
        proc.stdin.write_eof()
        assert await asyncio.wait_for(proc.stdout.read(), 60) == b""  # type: ignore[union-attr]
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
