"""Remote attachments: each due one fetched once, kept in the encrypted store.

The download, its checks and its decryption are the engine's attachment fetching
role (cone/engine/roles/attachments.py, on HTTP in cone/engine/_download.py: what a
peer's URL may reach is decided there); here the decrypted envelope is read within
its caps and the file then lives in cone's store like an inline one. A failure is
recorded on the attachment (`error`, shown on the message) and retried with backoff,
from 2 s doubling to an hour; it is never dropped.

Only attachments in Receive's view are fetched (an accepted conversation, a sender
not blocked: `store.attachments.due`): a stranger or a blocked peer learns nothing by
sending one; a request's are fetched once it is accepted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable
from typing import Final

from cone import limits
from cone.core import content
from cone.engine.roles.attachments import AttachmentFetching, DownloadError
from cone.store import Store, attachments
from cone.store.attachments import ToFetch

log = logging.getLogger(__name__)

RETRY_START_S: Final = 2.0
RETRY_MAX_S: Final = 3600.0
# Downloads at once: a peer sending many slow URLs holds at most this many.
PARALLEL: Final = 2
# Seconds the fetcher waits at most with nothing due: a request accepted without a
# wake-up (a send to it accepts it) has its files fetched within this.
IDLE_CHECK_S: Final = 60.0


async def fetch(fetching: AttachmentFetching, ref: dict[str, object]) -> content.AttachmentPart:
    """One remote attachment's file: fetched and decrypted by `fetching`, its envelope
    read within the remote attachments' cap; DownloadError says why not."""
    envelope = await fetching.fetch_attachment(ref)
    try:
        return await asyncio.to_thread(
            content.attachment_of, envelope, limits.REMOTE_ATTACHMENT_MAX_BYTES
        )
    except content.Unreadable as exc:
        raise DownloadError(str(exc)) from None


def _backoff_ns(attempts: int) -> int:
    delay = min(RETRY_START_S * 2 ** max(0, attempts), RETRY_MAX_S)
    return time.time_ns() + int(delay * (0.75 + random.random() / 2) * 1e9)


class Fetcher:
    """Downloads remote attachments that are due, in the background."""

    def __init__(
        self, store: Store, fetching: AttachmentFetching, on_fetched: Callable[[], None]
    ) -> None:
        self._store = store
        self._fetching = fetching
        self._on_fetched = on_fetched
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(PARALLEL)

    def start(self) -> None:
        """Start downloading (what is due now, then as it becomes due)."""
        self._task = asyncio.create_task(self._run(), name="attachments")

    async def stop(self) -> None:
        """Stop; downloads that were under way are tried again at the next start."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        """New messages may carry remote attachments."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                due = await self._store.read(attachments.due, time.time_ns())
                await asyncio.gather(*(self._one(item) for item in due))
                next_ns = await self._store.read(attachments.next_due_ns)
            except Exception:  # the worker's boundary: a failed round must not end it
                log.exception("attachment downloads failed; trying again shortly")
                next_ns = time.time_ns() + int(RETRY_START_S * 1e9)
            if due and next_ns is not None and next_ns <= time.time_ns():
                continue
            wait = IDLE_CHECK_S
            if next_ns is not None:
                wait = min(wait, max(0.0, (next_ns - time.time_ns()) / 1e9))
            try:
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _one(self, item: ToFetch) -> None:
        ref = json.loads(item.remote_json)
        async with self._slots:
            try:
                part = await fetch(self._fetching, ref)
            except DownloadError as exc:
                error = str(exc)
            except Exception as exc:  # a peer's file must never stop the worker
                error = f"{type(exc).__name__}: {exc}"
            else:
                assert part.data is not None
                await self._store.write(
                    attachments.fetched,
                    item.message_id,
                    item.index,
                    part.data,
                    part.filename,
                    part.mime_type,
                )
                self._on_fetched()
                return
        log.info("remote attachment of %s: %s (retrying)", item.message_id, error)
        await self._store.write(
            attachments.failed, item.message_id, item.index, error, _backoff_ns(item.attempts)
        )
        self._on_fetched()


__all__ = ["Fetcher", "fetch"]
