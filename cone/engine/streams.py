"""libxmtp streams, supervised: restarted with exponential backoff and jitter.

A libxmtp stream ends for good when the node closes it (libxmtp 1.10 does not
resubscribe), so each stream here is owned by a supervisor task that reopens it.
Stream callbacks arrive on libxmtp's threads; there each item is converted into
plain values (a conversation id, consent records) and handed to the event loop, so no
libxmtp object is touched on the loop. Opening and ending a stream go through the
engine's offload like every other libxmtp call. Events are triggers, not data: the core re-reads libxmtp's database after
each one (streams are known to skip messages), so a lost event costs latency, never
a message.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.engine._errors import stream_error
from cone.engine.values import StreamHealth
from cone.errors import ConeError

log = logging.getLogger(__name__)

BACKOFF_START_S = 0.2
BACKOFF_MAX_S = 30.0


class _Callback(ffi.FfiMessageCallback, ffi.FfiConversationCallback, ffi.FfiConsentCallback):
    """A libxmtp callback object (for any of the three streams) that forwards to the loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        convert: Callable[[Any], Any],
        on_item: Callable[[Any], None],
        health: StreamHealth,
    ) -> None:
        self._loop = loop
        self._convert = convert
        self._on_item = on_item
        self._health = health
        self.closed = asyncio.Event()
        self.error: str | None = None

    def _item(self, item: Any) -> None:
        # On libxmtp's thread: read what the loop needs here, not on the loop. Every
        # item is an event of the stream, one that is dropped here included.
        self._health.last_event_ns = time.time_ns()
        try:
            value = self._convert(item)
        except Exception as exc:  # a callback must not raise into libxmtp
            log.warning("a stream item could not be read: %s", exc)
            return
        if value is not None:
            self._to_loop(self._on_item, value)

    def _to_loop(self, fn: Callable[..., None], *args: Any) -> None:
        # Nothing may raise into libxmtp: an exception in a callback is a panic there,
        # and a panic aborts the whole process. libxmtp may end a stream after the
        # loop that owned it has closed (the daemon stopping while a resubscription
        # hangs): that news has nobody left to reach.
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed
            pass

    # libxmtp's callback protocols name the item method differently per stream.
    def on_message(self, message: Any) -> None:
        self._item(message)

    def on_conversation(self, conversation: Any) -> None:
        self._item(conversation)

    def on_consent_update(self, consent: Any) -> None:
        self._item(consent)

    def on_error(self, error: Any) -> None:
        self._to_loop(self._set_error, str(error))

    def _set_error(self, msg: str) -> None:
        self.error = msg

    def on_close(self) -> None:
        self._to_loop(self.closed.set)


async def _closed_or_renewed(closed: asyncio.Event, renew: asyncio.Event) -> bool:
    """Wait until the subscription closes (False) or a renewal is asked for (True)."""
    waits = [asyncio.ensure_future(closed.wait()), asyncio.ensure_future(renew.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    return renew.is_set() and not closed.is_set()


@dataclass(frozen=True)
class StreamHandle:
    """An open stream: `end()` closes it (a bounded libxmtp call)."""

    end: Callable[[], Awaitable[None]]


#: Opens a stream with a callback, and returns once it is ready.
Opener = Callable[[Any], Awaitable[StreamHandle]]


@dataclass
class SupervisedStream:
    """One stream kept open by a supervisor task; `convert` runs on libxmtp's thread
    (None drops the item), `on_item` on the loop."""

    name: str
    opener: Opener
    convert: Callable[[Any], Any]
    on_item: Callable[[Any], None]
    on_restart: Callable[[], None]
    # Told each error that ended or refused the stream.
    on_error: Callable[[str], None] = lambda error: None
    health: StreamHealth = field(init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    # Set once the first subscription has succeeded or failed.
    _settled: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    # Cuts a backoff wait short (the network is known to be back).
    _retry_now: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    # Asks for a fresh subscription while this one is open (see `renew`).
    _renew: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def __post_init__(self) -> None:
        self.health = StreamHealth(self.name)

    async def start(self, timeout: float = 10.0) -> None:
        """Start the supervisor and wait until the first subscription is ready or has
        failed (a failed one keeps retrying: the network may be down at start)."""
        self._task = asyncio.create_task(self._run(), name=f"stream-{self.name}")
        try:
            async with asyncio.timeout(timeout):
                await self._settled.wait()
        except TimeoutError:
            log.warning("stream %s not ready after %.0f s; it keeps retrying", self.name, timeout)

    def retry_now(self) -> None:
        """Reopen now if the stream is waiting out a backoff."""
        self._retry_now.set()

    def renew(self) -> None:
        """Open a fresh subscription now, and close the open one once it is ready:
        libxmtp chooses a stream's conversations when it subscribes, and not again.
        Not a restart: the open one carries on meanwhile, so nothing waits and no
        backoff, error or `on_restart` follows. A fresh subscription that fails ends
        both, and the stream restarts as after any failure. A stream waiting out a
        backoff reopens now."""
        self._renew.set()
        self._retry_now.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        delay = BACKOFF_START_S
        failed = False  # the subscription before this one ended or was refused
        while True:
            callback = _Callback(loop, self.convert, self.on_item, self.health)
            closer = None
            # This subscription is the fresh one asked for; a later ask renews it.
            self._renew.clear()
            try:
                closer = await self.opener(callback)
                self.health.connected = True
                self._settled.set()
                if failed:
                    # Whatever the gap skipped is read back from libxmtp's database.
                    self.on_restart()
                    failed = False
                opened_at = time.monotonic()
                while await _closed_or_renewed(callback.closed, self._renew):
                    # Make before break: the open subscription carries its
                    # conversations until the fresh one is ready, so a node slow to
                    # subscribe holds nothing back. Both may hand over a message
                    # meanwhile: ingest takes an id once.
                    self._renew.clear()
                    began, held = time.monotonic(), closer
                    callback, closer = (
                        _Callback(loop, self.convert, self.on_item, self.health),
                        None,
                    )
                    try:
                        closer = await self.opener(callback)
                    finally:
                        await self._end(held)  # a fresh one that failed is the failure
                    log.debug("stream %s renewed in %.2f s", self.name, time.monotonic() - began)
                if time.monotonic() - opened_at > BACKOFF_MAX_S:
                    delay = BACKOFF_START_S
                raw = callback.error or ""
                self.health.last_error = (
                    stream_error(raw) if raw else "the stream ended: the node closed it"
                )
            except asyncio.CancelledError:
                if closer is not None:
                    await self._end(closer)
                raise
            except Exception as exc:  # any failure means: retry later
                # A refused subscription's own error may still be on its way to the
                # loop (call_soon_threadsafe): let it land, and prefer it.
                await asyncio.sleep(0)
                raw = callback.error or str(exc)
                # A ConeError (from the engine's calls) is cone's sentence already.
                self.health.last_error = (
                    stream_error(callback.error)
                    if callback.error
                    else (exc.message if isinstance(exc, ConeError) else str(exc))
                )
            finally:
                self.health.connected = False
                self._settled.set()
            failed = True
            self.health.restarts += 1
            # The engine reads libxmtp's own words (the V3 cutover's text).
            self.on_error(raw)
            log.info(
                "stream %s ended (%s); reopening in %.1f s",
                self.name,
                self.health.last_error,
                delay,
            )
            self._retry_now.clear()
            try:
                async with asyncio.timeout(delay * (0.5 + random.random())):
                    await self._retry_now.wait()
                delay = BACKOFF_START_S
            except TimeoutError:
                delay = min(delay * 2, BACKOFF_MAX_S)

    async def _end(self, closer: StreamHandle) -> None:
        try:
            await closer.end()
        except Exception as exc:  # given up on: libxmtp aborts its task anyway
            log.warning("ending stream %s: %s", self.name, exc)

    async def stop(self) -> None:
        """Stop the supervisor and close the stream."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
