"""Raw libxmtp peers for tests: real clients on a node URL, with files under a test dir.

alice = await Peer.create(url, tmp_path, "alice")
dm = await alice.dm_with(bob)
stream = await bob.stream_all()
await alice.send(dm, "hi")
assert await stream.texts(1) == ["hi"]
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.engine import _client

#: Peers created and not yet closed; tests/conftest.py closes them after each test.
OPEN: list[Peer] = []

#: Seconds a test waits for anything libxmtp does before failing.
WAIT_S = 30.0

_APPLICATION = ffi.FfiConversationMessageKind.APPLICATION


def text_of(message: Any) -> str | None:
    """The text of an application message, None for membership changes."""
    if message.kind != _APPLICATION:
        return None
    return str(ffi.decode_text(message.content))


@dataclass
class MessageStream:
    """A libxmtp message stream collected into a queue, fed from libxmtp's threads."""

    own_inbox_id: str
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    errors: list[str] = field(default_factory=list)
    closer: Any = None

    async def texts(self, count: int, timeout: float = WAIT_S) -> list[str]:
        """The next `count` texts from other inboxes, in arrival order."""
        out: list[str] = []
        async with asyncio.timeout(timeout):
            while len(out) < count:
                message = await self.queue.get()
                text = text_of(message)
                if text is not None and message.sender_inbox_id != self.own_inbox_id:
                    out.append(text)
        return out

    def pending_texts(self) -> list[str]:
        """Texts from other inboxes already queued, without waiting."""
        out = []
        while not self.queue.empty():
            message = self.queue.get_nowait()
            text = text_of(message)
            if text is not None and message.sender_inbox_id != self.own_inbox_id:
                out.append(text)
        return out

    async def end(self) -> None:
        """Close the stream and wait for libxmtp to confirm."""
        if self.closer is not None and not self.closer.is_closed():
            await self.closer.end_and_wait()


class _Callback(ffi.FfiMessageCallback):
    def __init__(self, loop: asyncio.AbstractEventLoop, stream: MessageStream) -> None:
        self._loop = loop
        self._stream = stream

    def on_message(self, message: Any) -> None:
        self._loop.call_soon_threadsafe(self._stream.queue.put_nowait, message)

    def on_error(self, error: Any) -> None:
        self._loop.call_soon_threadsafe(self._stream.errors.append, str(error))

    def on_close(self) -> None:
        self._loop.call_soon_threadsafe(self._stream.closed.set)


def plain_group_options() -> Any:
    """libxmtp's options for a group with no name, settings or permissions of its own."""
    return ffi.FfiCreateGroupOptions(
        permissions=None, group_name=None, group_image_url_square=None,
        group_description=None, custom_permission_policy_set=None,
        message_disappearing_settings=None, app_data=None,
    )  # fmt: skip


@dataclass
class Peer:
    """One real libxmtp client with its wallet and database."""

    name: str
    client: Any
    wallet_key: bytes
    address: str
    inbox_id: str

    @classmethod
    async def create(cls, url: str, directory: Path, name: str, *, d14n: bool = False) -> Peer:
        """Make a wallet, open its client on `url` with its database in `directory`, register.
        With `d14n`, libxmtp speaks D14N with `url` as its gateway."""
        key = _client.generate_wallet_key()
        client = await _client.open_client(
            api_url=url,
            db_path=str(directory / f"{name}.db3"),
            db_key=os.urandom(32),
            wallet_key=key,
            gateway_url=url if d14n else None,
        )
        peer = cls(name, client, key, _client.wallet_address(key), client.inbox_id())
        OPEN.append(peer)
        return peer

    def close(self) -> None:
        """Release the client's database, so its background workers stop working
        once its test is over (they would otherwise retry against a stopped node)."""
        self.client.release_db_connection()

    def identifier(self) -> Any:
        """This peer's libxmtp identifier (its address)."""
        return _client.identifier(self.address)

    async def dm_with(self, other: Peer) -> Any:
        """Find or create the DM with `other`, resolving it by address."""
        opts = ffi.FfiCreateDmOptions(message_disappearing_settings=None)
        return await self.client.conversations().find_or_create_dm_by_identity(
            other.identifier(), opts
        )

    async def group_with(self, *others: Peer) -> Any:
        """Create a group with `others`, resolving them by address."""
        ids = [o.identifier() for o in others]
        return await self.client.conversations().create_group_by_identity(
            ids, plain_group_options()
        )

    async def send(self, conversation: Any, text: str) -> bytes:
        """Send a text message; returns its id once the node has it."""
        message_id: bytes = await conversation.send_text(text)
        return message_id

    async def sync(self) -> None:
        """Fetch welcomes and every conversation's messages."""
        await self.client.conversations().sync_all_conversations(None)

    def conversation(self, conversation_id: bytes) -> Any:
        """A conversation this peer knows, by id."""
        return self.client.conversation(conversation_id)

    async def messages(self, conversation_id: bytes, *, sync: bool = True) -> list[Any]:
        """Every message of the conversation, oldest first, after syncing it (libxmtp
        refuses to sync a group the peer was removed from: pass `sync=False`)."""
        conversation = self.conversation(conversation_id)
        if sync:
            await conversation.sync()
        opts = ffi.FfiListMessagesOptions(
            sent_before_ns=None, sent_after_ns=None, limit=None, delivery_status=None,
            direction=ffi.FfiDirection.ASCENDING, content_types=None,
            exclude_content_types=None, exclude_sender_inbox_ids=None, sort_by=None,
            inserted_after_ns=None, inserted_before_ns=None,
        )  # fmt: skip
        found: list[Any] = await conversation.find_messages(opts)
        return found

    async def received(self, conversation_id: bytes) -> list[Any]:
        """The application messages others sent into a conversation, after fetching
        welcomes (so a conversation created by someone else is known) and syncing it."""
        await self.client.conversations().sync()
        return [
            m
            for m in await self.messages(conversation_id)
            if m.kind == _APPLICATION and m.sender_inbox_id != self.inbox_id
        ]

    async def texts(self, conversation_id: bytes, *, sync: bool = True) -> list[str]:
        """Every text in the conversation, oldest first (see `messages`)."""
        messages = await self.messages(conversation_id, sync=sync)
        return [t for t in (text_of(m) for m in messages) if t is not None]

    async def stream_all(self) -> MessageStream:
        """Stream every message of every conversation, new ones included, into a queue.

        libxmtp does not resubscribe when the node ends the stream: `closed` is set
        then, and the test opens a new stream."""
        stream = MessageStream(self.inbox_id)
        callback = _Callback(asyncio.get_running_loop(), stream)
        stream.closer = await self.client.conversations().stream_all_messages(callback, None)
        await stream.closer.wait_for_ready()
        return stream
