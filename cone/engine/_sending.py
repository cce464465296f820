"""Sending, in two phases: a message is stored in libxmtp unpublished, then published.

A new message is stored with its intent to publish (`send_optimistic`) and published
with whatever else the conversation has queued, in a round of `publish_messages`
shared by the sends waiting for it (cone/engine/_rounds.py): sends outstanding at
once in one conversation share libxmtp's cycles instead of taking one each. A
message prepared on its own (`prepare`: a backup's hold) has no intent until
`publish` queues one.

Part of the engine: calls go through its `Calls`. A publication the node refuses as
a V3 client's is reported as the cutover (`_cutover.Cutover.unless_refused`), and one
it accepts clears that state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.engine._calls import LOCAL_CALL_S, NETWORK_CALL_S, Calls
from cone.engine._cutover import Cutover
from cone.engine._echoes import Echoes
from cone.engine._rounds import Rounds
from cone.errors import Unavailable

# Every message cone sends asks for a push notification (XMTP's default).
_PUSHED = ffi.FfiSendMessageOpts(should_push=True)


class Sending:
    """Prepare, publish, or both in one call, through one identity's libxmtp client.

    `client` gives libxmtp's current client at each call (it changes at the cutover);
    `echoes` learns each message `send` makes, whose stream echo is then dropped."""

    def __init__(
        self, client: Callable[[], Any], calls: Calls, cutover: Cutover, echoes: Echoes
    ) -> None:
        self._client = client
        self._x = calls
        self._cut = cutover
        self._echoes = echoes
        self._rounds = Rounds()

    async def prepare(self, conversation_id: str, payload: bytes) -> str:
        """Store an outgoing message in libxmtp as unpublished; returns its id."""
        key = bytes.fromhex(conversation_id)

        def prepared() -> str:
            return bytes(self._client().conversation(key).prepare_message(payload, True)).hex()

        return await self._x.call_sync(prepared, LOCAL_CALL_S, "preparing a message")

    async def send(
        self,
        conversation_id: str,
        payload: bytes,
        prepared: Callable[[str], None],
        seen: Callable[[], None] = lambda: None,
    ) -> str:
        """Prepare and publish a new message in one call into libxmtp (one worker
        hop, not two); returns its id. `prepared` is told the id on libxmtp's worker
        thread as soon as the message is stored with its intent to publish, before
        its publication, so a caller whose publication fails or overruns still knows
        it: keep it to recording the id (and to letting the conversation's next send
        be prepared: messages queued meanwhile go out in the same publication).
        `seen` is called on this loop when the message stream echoes the message (the
        node has it), mostly before this returns: libxmtp's call goes on to read the
        conversation back. A failure raises as `prepare`'s or `publish`'s would.

        The message stream's echo of the message is dropped on libxmtp's thread and
        never reaches `on_message`: the caller accounts for its own send."""
        key = bytes.fromhex(conversation_id)
        ids: list[str] = []
        on_echo = _on_loop(seen)

        async def sent() -> str:
            conversation = self._client().conversation(key)
            # Stored with its intent to publish, queued behind the conversation's
            # earlier ones: whichever publication runs next publishes them all, in
            # the order they were queued (one libxmtp cycle for several sends).
            message = conversation.send_optimistic(payload, _PUSHED)
            message_id = bytes(message).hex()
            ids.append(message_id)
            self._echoes.add(bytes(message), on_echo)
            prepared(message_id)
            await self._rounds.publish(
                key, lambda: self._client().conversation(key).publish_messages()
            )
            return message_id

        try:
            message_id: str = await self._x.offload.run(sent, NETWORK_CALL_S, "sending a message")
        except ffi.FfiError as exc:
            if not ids:
                raise self._x.error(exc, "preparing a message") from exc
            err = self._x.error(exc, "publishing a message")
            err.__cause__ = exc
            if isinstance(err, Unavailable):
                err = await self._cut.unless_refused(err, "publishing a message")
            raise err from exc
        self._cut.accepted()
        return message_id

    async def publish(
        self, conversation_id: str, message_id: str, seen: Callable[[], None] = lambda: None
    ) -> None:
        """Publish a prepared message; harmless to repeat after success. `seen` as
        for `send` (not called when libxmtp finds it published already)."""
        key, message = bytes.fromhex(conversation_id), bytes.fromhex(message_id)
        self._echoes.add(message, _on_loop(seen))
        doing = "publishing a message"
        try:
            await self._x.call(
                lambda: self._client().conversation(key).publish_stored_message(message),
                NETWORK_CALL_S,
                doing,
            )
        except Unavailable as err:
            raise await self._cut.unless_refused(err, doing) from err.__cause__
        self._cut.accepted()


def _on_loop(seen: Callable[[], None]) -> Callable[[], None]:
    """`seen`, called on the running loop from libxmtp's callback thread."""
    loop = asyncio.get_running_loop()

    def echoed() -> None:
        try:
            loop.call_soon_threadsafe(seen)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    return echoed


__all__ = ["Sending"]
