"""`cone devnet-ctl`: inject faults into a running devnet through its control socket.

Each action prints one JSON object on stdout. Exit codes: 0 done, 2 bad argument
(unknown method, bad status code), 5 no devnet answers on the socket, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import grpc

from cone.devnet.control import ControlClient
from cone.devnet.cutover import format_time, parse_time
from cone.errors import ConeError


def run(args: argparse.Namespace) -> int:
    """Carry out one control action; returns the exit code."""
    try:
        with ControlClient(args.control) as client:
            result = _act(client, args)
    except ConeError as exc:
        print(f"cone devnet-ctl: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except grpc.RpcError as exc:
        code = exc.code()
        print(f"cone devnet-ctl: {code.name}: {exc.details()}", file=sys.stderr)
        if code is grpc.StatusCode.INVALID_ARGUMENT:
            return 2
        return 5 if code is grpc.StatusCode.UNAVAILABLE else 1
    print(json.dumps(result))
    return 0


def _act(client: ControlClient, args: argparse.Namespace) -> dict[str, Any]:
    if args.action == "drop-streams":
        return {"droppedStreams": client.drop_streams()}
    if args.action == "fail":
        method = client.fail_next(args.method, args.count, args.code, args.message)
        return {"method": method, "count": args.count, "code": args.code}
    if args.action == "latency":
        return {"method": client.set_latency(args.method, args.ms / 1000), "latencyMs": args.ms}
    if args.action in ("cutover", "v3-cutover"):
        at_ns = None if args.off else parse_time(args.at)
        response = client.set_cutover(at_ns)
        return {
            "v3Cutover": not args.off,
            "cutoverAt": format_time(response.cutover_ns),
            "cutoverNs": response.cutover_ns,
            "endedStreams": response.ended_streams,
        }
    if args.action == "clear":
        client.clear()
        return {"cleared": True}
    stats = client.stats()
    return {
        "methods": {
            m.method: {
                "calls": m.calls,
                "meanUs": round(m.total_ns / m.calls / 1000, 1) if m.calls else 0,
            }
            for m in stats.methods
        },
        "streamDeliveries": stats.stream_deliveries,
        "meanDeliveryUs": round(stats.stream_delivery_total_ns / stats.stream_deliveries / 1000, 1)
        if stats.stream_deliveries
        else 0,
        "openStreams": stats.open_streams,
    }
