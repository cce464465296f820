"""`cone tail`: follow incoming messages, one line each, until Ctrl-C.

Without `--ack` it reads with `peek`, which touches no receipt: from now on, or with
`--consumer C` from the oldest message C has not acknowledged. With `--ack` it
receives as the consumer (`default` unless given) and acknowledges each batch once
printed, as any consumer does. `--json` prints each message as one JSON object per
line, in the shape `receive` returns.

It follows the inbox sequence, which is the order messages become receivable: a new
message in an accepted conversation, and a request's messages when it is accepted
(they take new sequences then), are both printed. "From now on" starts when the
process starts, not when it first reaches the core: of the last `BATCH` messages the
inbox holds at its first answer, those sent since the process started are printed
too (a message arriving while tail starts, or taken in by a core tail itself started).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import IO, Any, Final, Protocol

from google.protobuf.timestamp_pb2 import Timestamp

from cone import limits
from cone.commands import _render
from cone.errors import Unavailable


class Context(Protocol):
    """What tailing reads of a command's run (`cone.commands.command.Context`, which
    calls this module)."""

    args: argparse.Namespace
    out: IO[str]


JsonObject = dict[str, Any]
Call = Callable[..., Awaitable[JsonObject]]

WAIT_MS: Final = 25_000
BATCH: Final = 100
# Pause after a failed long poll (the network down, say) before the next one.
RETRY_S: Final = 2.0


def _print(ctx: Context, message: JsonObject) -> None:
    if ctx.args.json:
        ctx.out.write(json.dumps(message, ensure_ascii=False) + "\n")
    else:
        ctx.out.write(_render.message_line(message) + "\n")
    ctx.out.flush()


async def _poll(ctx: Context, call: Call, method: str, params: JsonObject) -> JsonObject | None:
    """One long poll; None (after a pause) when the network is down."""
    try:
        return await call(ctx, method, params)
    except Unavailable as err:
        if err.reason != "sync_failed":
            raise
        print(f"cone tail: {err.message}; still watching", file=sys.stderr, flush=True)
        await asyncio.sleep(RETRY_S)
        return None


def process_started_ns() -> int:
    """When this process started, wall clock in ns (from /proc on Linux, to its 10 ms
    tick; elsewhere: now). A message sent after the user started `cone tail` counts,
    even if it came in while the interpreter was still loading."""
    try:
        with open("/proc/self/stat") as stat:
            after_name = stat.read().rsplit(")", 1)[1].split()
        ticks = int(after_name[19])  # field 22, starttime: clock ticks since boot
        age_ns = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - ticks * 10**9 // os.sysconf(
            "SC_CLK_TCK"
        )
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time_ns()
    return time.time_ns() - max(0, age_ns)


def _sent_ns(message: JsonObject) -> int:
    """The message's sent time in ns since the epoch (0 when it has none)."""
    if not message.get("sentAt"):
        return 0
    stamp = Timestamp()
    stamp.FromJsonString(message["sentAt"])
    return int(stamp.ToNanoseconds())


async def _since_start(ctx: Context, call: Call, started_ns: int) -> int:
    """Print what was sent since the command started and came in before its first
    answer; returns the head sequence to follow from."""
    head = int((await call(ctx, "peek", {"limit": 1}))["headSequence"])
    after = max(0, head - BATCH)
    while after < head:
        params = {"afterSequence": after, "limit": BATCH}
        batch = await call(ctx, "peek", params)
        for message in batch["messages"]:
            if int(message["sequence"]) > head:
                return head  # the follow loop prints it
            if _sent_ns(message) >= started_ns:
                _print(ctx, message)
            after = int(message["sequence"])
        if not batch["more"]:
            break
    return head


async def tail(ctx: Context, call: Call) -> int:
    """Follow until interrupted."""
    started_ns = process_started_ns()
    args = ctx.args
    if args.ack:
        consumer = args.consumer or limits.DEFAULT_CONSUMER
        while True:
            params = {"consumer": consumer, "limit": BATCH, "waitMs": WAIT_MS}
            batch = await _poll(ctx, call, "receive", params)
            if not batch or not batch["messages"]:
                continue
            for message in batch["messages"]:
                _print(ctx, message)
            ids = [m["messageId"] for m in batch["messages"]]
            await call(ctx, "ack", {"consumer": consumer, "messageIds": ids})
    base: JsonObject = {"consumer": args.consumer} if args.consumer else {}
    if args.consumer:
        after = 0
    else:
        after = await _since_start(ctx, call, started_ns)
    while True:
        params = {**base, "afterSequence": after, "limit": BATCH, "waitMs": WAIT_MS}
        batch = await _poll(ctx, call, "peek", params)
        if not batch:
            continue
        for message in batch["messages"]:
            _print(ctx, message)
            after = max(after, int(message["sequence"]))


__all__ = ["tail"]
