"""The floor of cone's send design: its steps on raw libxmtp, in the bench's process.

A send here is what a cone send is with nothing of cone around it: the key claimed
in a synced SQLite commit (plain SQLite, WAL, `synchronous=FULL`, on this thread: no
encryption, no thread hop), the message stored with its intent (`send_optimistic`),
published by `publish_messages`, and answered at the first of its echo on this
client's message stream or the call's return; the call's read-back goes on in the
background. No daemon, no socket, no gRPC: no build of cone's design can send
faster than this, so its ratio to the Node SDK says whether a goal is within reach.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from support.peers import Peer

_PUSHED = ffi.FfiSendMessageOpts(should_push=True)


class _Echoes(ffi.FfiMessageCallback):
    """The message stream: resolves the future waiting for each message id."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: dict[bytes, asyncio.Future[None]] = {}

    def on_message(self, message: Any) -> None:
        future = self.waiting.pop(bytes(message.id), None)
        if future is not None:
            self.loop.call_soon_threadsafe(_done, future)

    def on_error(self, error: Any) -> None:
        pass

    def on_close(self) -> None:
        pass


def _done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Floor:
    """One raw libxmtp client sending the way cone does, into DMs with `targets`."""

    def __init__(self, dms: list[Any], echoes: _Echoes, closer: Any, db: Any) -> None:
        self.dms, self._echoes, self._closer, self._db = dms, echoes, closer, db
        self._calls: set[asyncio.Future[None]] = set()

    @classmethod
    async def create(cls, url: str, work: Path, targets: list[Peer]) -> Floor:
        peer = await Peer.create(url, work, "floor")
        dms = [await peer.dm_with(t) for t in targets]
        echoes = _Echoes(asyncio.get_running_loop())
        closer = await peer.client.conversations().stream_all_messages(echoes, None)
        await closer.wait_for_ready()
        db = sqlite3.connect(work / "floor.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE keys (key TEXT PRIMARY KEY, payload BLOB)")
        return cls(dms, echoes, closer, db)

    def sender(self, dm: Any) -> Any:
        """A `Send` into `dm`."""

        async def send(n: int) -> None:
            payload = ffi.encode_text(f"floor {n}")
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("INSERT INTO keys VALUES (?, ?)", (f"f{n}", payload))
            self._db.execute("COMMIT")
            message = dm.send_optimistic(payload, _PUSHED)
            echo = asyncio.get_running_loop().create_future()
            self._echoes.waiting[bytes(message)] = echo
            call = asyncio.ensure_future(dm.publish_messages())
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)
            await asyncio.wait({echo, call}, return_when=asyncio.FIRST_COMPLETED)
            self._echoes.waiting.pop(bytes(message), None)

        return send

    async def close(self) -> None:
        """Let the read-backs finish, end the stream, close the claims' database."""
        await asyncio.gather(*self._calls, return_exceptions=True)
        await self._closer.end_and_wait()
        self._db.close()
