"""The intake bench's baseline receiver: a raw libxmtp client in a process of its own.

    python -m bench._rawreceiver URL DIRECTORY

Registers a new inbox on URL (its database in DIRECTORY), prints `inbox INBOX_ID`,
then runs as an app would: its message stream and conversation stream open; a
`sync_all_conversations` (bounded) once a burst of new conversations has gathered for
a second (once more if more came meanwhile), and every five seconds besides (a first
message sent while the message stream resubscribed reaches it only by a sync); its
listing read after each sync for first messages the stream skipped. For each
conversation whose first message from another inbox it takes in, it prints `taken
CONVERSATION_ID MONOTONIC_SECONDS` (CLOCK_MONOTONIC, which the bench process shares);
libxmtp writes its own log lines to stdout too. It runs until stdin closes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from xmtp_bindings import xmtpv3 as ffi

from cone.engine import _convert
from support.peers import Peer, text_of

GATHER_S = 1.0
SAFETY_SYNC_S = 5.0
SYNC_BOUND_S = 120.0


class _Callback(ffi.FfiMessageCallback, ffi.FfiConversationCallback):
    def __init__(self, loop: asyncio.AbstractEventLoop, on_item: Callable[[Any], None]) -> None:
        self._loop = loop
        self._on_item = on_item

    def on_message(self, message: Any) -> None:
        self._loop.call_soon_threadsafe(self._on_item, message)

    def on_conversation(self, conversation: Any) -> None:
        self._loop.call_soon_threadsafe(self._on_item, conversation)

    def on_error(self, error: Any) -> None:
        print(f"raw stream error: {error}", file=sys.stderr)

    def on_close(self) -> None:
        pass


async def run(url: str, directory: Path) -> None:
    raw = await Peer.create(url, directory, "raw")
    loop = asyncio.get_running_loop()
    convs = raw.client.conversations()
    wanted = asyncio.Event()
    seen: set[str] = set()

    def message(m: Any) -> None:
        cid = bytes(m.conversation_id).hex()
        if cid not in seen and m.sender_inbox_id != raw.inbox_id and text_of(m) is not None:
            seen.add(cid)
            print("taken", cid, time.monotonic(), flush=True)

    def conversation(_: Any) -> None:
        wanted.set()

    async def syncing() -> None:
        # A burst of new conversations is synced once it has gathered for a second,
        # and everything every five seconds besides: a first message sent while the
        # message stream resubscribed reaches the database only by a sync.
        while True:
            try:
                await asyncio.wait_for(wanted.wait(), SAFETY_SYNC_S)
                await asyncio.sleep(GATHER_S)
            except TimeoutError:
                pass
            wanted.clear()
            try:  # bounded, as cone bounds its syncs
                await asyncio.wait_for(convs.sync_all_conversations(None), SYNC_BOUND_S)
            except TimeoutError:
                print(f"sync_all_conversations not done in {SYNC_BOUND_S} s", file=sys.stderr)
            for item in convs.list(_convert.every_conversation()):
                last = item.last_message()
                if last is not None:
                    message(last)

    streams = [
        await convs.stream_all_messages(_Callback(loop, message), None),
        await convs.stream(_Callback(loop, conversation)),
    ]
    for s in streams:
        await s.wait_for_ready()
    syncer = asyncio.create_task(syncing())
    print("inbox", raw.inbox_id, flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    syncer.cancel()
    sys.stdout = open(os.devnull, "w")  # noqa: ASYNC230  # the bench stopped reading
    for s in streams:
        s.end()
    raw.close()


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1], Path(sys.argv[2])))
