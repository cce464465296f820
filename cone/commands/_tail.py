"""`cone tail`: follow incoming messages, one line each, until Ctrl-C.

Without `--ack` it reads with `peek`, which touches no receipt: from now on, or with
`--consumer C` from the oldest message C has not acknowledged. With `--ack` it
receives as the consumer (`default` unless given) and acknowledges each batch once
printed, as any consumer does. `--json` prints each message as one JSON object per
line, in the shape `receive` returns.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from cone import limits
from cone.commands import _render
from cone.errors import Unavailable

if TYPE_CHECKING:
    from cone.commands.command import Context

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


async def tail(ctx: Context, call: Call) -> int:
    """Follow until interrupted."""
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
        after = (await call(ctx, "peek", {"limit": 1}))["headSequence"]
    while True:
        params = {**base, "afterSequence": after, "limit": BATCH, "waitMs": WAIT_MS}
        batch = await _poll(ctx, call, "peek", params)
        if not batch:
            continue
        for message in batch["messages"]:
            _print(ctx, message)
            after = max(after, int(message["sequence"]))


__all__ = ["tail"]
