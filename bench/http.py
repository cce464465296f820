"""HTTP front benchmarks, each against its baseline in the same run.

    python -m bench http [--calls 2000] [--messages 50]

- identity: sequential `identity` round trips as `POST /api/v1/rpc` (one kept-alive
  connection, the token checked on each), against the same JSON-RPC line on
  `cone.sock` and a direct gRPC call.
- events: a raw libxmtp peer sends a message at a time; from the peer's send returning
  to the message arriving on `GET /api/v1/events`, against the same message arriving
  at a `receive` long poll waiting at the same time (each message is measured on both).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import aiohttp

from cone.devnet import Devnet
from conepb.v1 import cone_pb2 as pb
from support.daemons import short_home
from support.http_daemon import Event, HttpDaemon, event_stream, next_message
from support.peers import Peer
from support.waiting import until

IDENTITY = {"jsonrpc": "2.0", "id": 1, "method": "identity"}


def _ms(xs: list[float]) -> str:
    return f"p50 {statistics.median(xs) * 1e3:.3f} ms, mean {statistics.fmean(xs) * 1e3:.3f} ms"


async def bench_identity(d: HttpDaemon, session: aiohttp.ClientSession, n: int) -> None:
    reader, writer = await asyncio.open_unix_connection(str(d.socket))
    line = json.dumps(IDENTITY).encode() + b"\n"
    http, socket, grpc = [], [], []
    for i in range(n + 100):  # the first 100 warm every path up
        t = time.perf_counter()
        status, _ = await d.rpc(IDENTITY, session)
        t1 = time.perf_counter()
        writer.write(line)
        await reader.readline()
        t2 = time.perf_counter()
        await d.client.identity()
        t3 = time.perf_counter()
        assert status == 200
        if i >= 100:
            http.append(t1 - t)
            socket.append(t2 - t1)
            grpc.append(t3 - t2)
    writer.close()
    print(f"identity x{n}: HTTP {_ms(http)}; JSON-RPC on cone.sock {_ms(socket)}; "
          f"direct gRPC {_ms(grpc)}; HTTP/cone.sock p50 ratio "
          f"{statistics.median(http) / statistics.median(socket):.2f}x")  # fmt: skip


async def bench_events(d: HttpDaemon, session: aiohttp.ClientSession, peer: Peer, n: int) -> None:
    from xmtp_bindings import xmtpv3 as ffi

    ident = await d.client.identity()
    kind = peer.identifier().identifier_kind
    dm = await peer.client.conversations().find_or_create_dm_by_identity(
        ffi.FfiIdentifier(identifier=ident.address, identifier_kind=kind),
        ffi.FfiCreateDmOptions(message_disappearing_settings=None),
    )
    await peer.send(dm, "hello")

    async def held() -> list[pb.ConversationRequest]:
        return list((await d.client.call("Requests", pb.RequestsRequest())).requests)

    (request,) = await until(held)
    await d.client.call("Accept", pb.AcceptRequest(conversation_id=request.conversation_id))
    first = await d.client.receive(consumer="rcv", wait_ms=10_000)
    await d.client.ack([m.message_id for m in first.messages], consumer="rcv")
    via_events, via_receive = [], []
    async with event_stream(d, session, "consumer=sse&heartbeat=30") as events:
        await next_message(events)  # "hello"
        for i in range(n):
            poll = asyncio.create_task(d.client.receive(consumer="rcv", wait_ms=30_000))
            await asyncio.sleep(0.05)  # let the long poll reach the daemon and wait
            text = f"m{i}"
            await peer.send(dm, text)
            sent = time.perf_counter()
            at_event, at_receive = await asyncio.gather(
                _event_with(events, text), _answer_of(d, poll)
            )
            via_events.append(at_event - sent)
            via_receive.append(at_receive - sent)
    print(f"events x{n}: peer send to SSE event {_ms(via_events)}; to receive's answer "
          f"{_ms(via_receive)}; SSE/receive p50 ratio "
          f"{statistics.median(via_events) / statistics.median(via_receive):.2f}x")  # fmt: skip


async def _event_with(events: asyncio.Queue[Event], text: str) -> float:
    while (await next_message(events)).json()["text"] != text:
        pass
    return time.perf_counter()


async def _answer_of(d: HttpDaemon, poll: asyncio.Task[pb.ReceiveResponse]) -> float:
    got = await poll
    at = time.perf_counter()
    await d.client.ack([m.message_id for m in got.messages], consumer="rcv")
    return at


async def _main(args: argparse.Namespace) -> None:
    async with Devnet(port=0) as url, aiohttp.ClientSession() as session:
        async with HttpDaemon(short_home(), url) as d:
            await bench_identity(d, session, args.calls)
            with tempfile.TemporaryDirectory() as peer_dir:
                peer = await Peer.create(url, Path(peer_dir), "peer")
                try:
                    await bench_events(d, session, peer, args.messages)
                finally:
                    peer.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench http", description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=50)
    asyncio.run(_main(parser.parse_args(argv)))
