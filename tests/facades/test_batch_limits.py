"""JSON-RPC batches on a real daemon's `cone.sock`: bounded, answered, never starving.

A batch of 100,000 calls (one 4.5 MB line) used to run whole, its elements outside the
bound on outstanding calls, and kept every other client of the daemon waiting ~75 s.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from cone.facades.jsonrpc._dispatch import MAX_BATCH
from support.daemons import DaemonProcess

#: A generous bound for an answer on a loaded, shared machine: not a speed claim.
ANSWER_S = 30.0


async def _answers(reader: asyncio.StreamReader, count: int) -> list[Any]:
    out = []
    async with asyncio.timeout(120):
        while len(out) < count:
            out.append(json.loads(await reader.readline()))
    return out


async def test_a_huge_batch_is_refused_whole_and_another_client_is_answered_meanwhile(
    home: Path, devnet: str
) -> None:
    async with DaemonProcess(home, devnet) as daemon:
        limit = 64 * 1024 * 1024
        a_reader, a_writer = await asyncio.open_unix_connection(daemon.socket, limit=limit)
        b_reader, b_writer = await asyncio.open_unix_connection(daemon.socket, limit=limit)
        call = {"jsonrpc": "2.0", "id": 1, "method": "identity"}
        huge = json.dumps([call] * 100_000).encode() + b"\n"
        full = [
            json.dumps([{**call, "id": f"{n}.{i}"} for i in range(MAX_BATCH)]).encode() + b"\n"
            for n in range(20)
        ]
        a_writer.write(huge + b"".join(full))
        await a_writer.drain()
        b_writer.write(b'{"jsonrpc":"2.0","id":"b","method":"identity"}\n')
        await b_writer.drain()
        (b_answer,) = await asyncio.wait_for(_answers(b_reader, 1), ANSWER_S)
        assert b_answer["id"] == "b" and b_answer["result"]["protocol"] == 1

        a_answers = await _answers(a_reader, 1 + len(full))
        refused = a_answers[0]  # lines are read in order; the refusal needs no call
        assert refused["id"] is None and refused["error"]["code"] == -32600
        assert f"at most {MAX_BATCH}" in refused["error"]["message"]
        ids = sorted(a["id"] for batch in a_answers[1:] for a in batch)
        assert ids == sorted(f"{n}.{i}" for n in range(20) for i in range(MAX_BATCH))
        for writer in (a_writer, b_writer):
            writer.close()
            await writer.wait_closed()
