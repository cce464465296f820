"""The streams' echoes of this engine's own sends and consent records.

The consent stream hands back every consent record this installation sets, too: its
echo is no news (the change itself already renewed the message streams), and is told
apart by `ConsentEchoes` so that it does not renew them a second time.

The rest is about messages, dropped where they arrive.

libxmtp's message stream hands back every message this installation publishes. cone
accounts for its own sends itself (the outbox's settle record tells ingest), so their
echo is dropped on libxmtp's callback thread, before it is converted or handed to the
event loop: no work on the loop at all for it. Only an id this engine published is
dropped; a message from another installation of the same inbox (same sender, an id
this process never made) passes to ingest as before.

The echo is also the first sign that the node has the message: a publication can be
told of it (`add`'s `seen`), about a third of a send before libxmtp's own publication
call returns from reading the conversation back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from cone.engine.values import XmtpConsent


class Echoes:
    """Raw ids of messages this engine is publishing or has published, until the
    stream echoes them (at most `LIMIT`, the oldest forgotten first: a stream that
    skipped an echo must not make the set grow). Filled on libxmtp's worker thread
    before the publication starts, so an id is in before its echo can arrive."""

    LIMIT: Final = 4096

    def __init__(self, inbox_id: str) -> None:
        self._inbox_id = inbox_id
        self._ids: dict[bytes, Callable[[], None] | None] = {}
        self._lock = threading.Lock()

    def add(self, message_id: bytes, seen: Callable[[], None] | None = None) -> None:
        """Note a message about to be published; `seen` is called (on libxmtp's
        callback thread: keep it to a thread-safe hand-off) when its echo arrives."""
        with self._lock:
            self._ids[message_id] = seen
            if len(self._ids) > self.LIMIT:
                del self._ids[next(iter(self._ids))]

    def take(self, sender_inbox_id: str, message_id: bytes) -> bool:
        """Whether a streamed message is the echo of one of these sends (asked once
        per message: a second echo of the same id passes)."""
        if sender_inbox_id != self._inbox_id:
            return False  # a peer's message: no lock taken
        with self._lock:
            if message_id not in self._ids:
                return False
            seen = self._ids.pop(message_id)
        if seen is not None:
            seen()
        return True


class ConsentEchoes:
    """Conversation consent this engine is recording, until the consent stream hands
    it back (at most `LIMIT`, the oldest forgotten first). Used on the event loop only:
    noted before libxmtp records it, so a record is in before its echo can arrive."""

    LIMIT: Final = 1024

    def __init__(self) -> None:
        self._records: dict[tuple[str, XmtpConsent], None] = {}

    def add(self, conversation_id: str, consent: XmtpConsent) -> None:
        """Note a record about to be set."""
        self._records[(conversation_id, consent)] = None
        if len(self._records) > self.LIMIT:
            del self._records[next(iter(self._records))]

    def discard(self, conversation_id: str, consent: XmtpConsent) -> None:
        """Forget a record libxmtp did not set (its call failed)."""
        self._records.pop((conversation_id, consent), None)

    def take(self, conversation_id: str, consent: XmtpConsent) -> bool:
        """Whether a streamed record is the echo of one of these (asked once per record)."""
        return self._records.pop((conversation_id, consent), False) is None


__all__ = ["ConsentEchoes", "Echoes"]
