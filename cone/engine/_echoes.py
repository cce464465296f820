"""The message stream's echoes of this engine's own sends, dropped where they arrive.

libxmtp's message stream hands back every message this installation publishes. cone
accounts for its own sends itself (the outbox's settle record tells ingest), so their
echo is dropped on libxmtp's callback thread, before it is converted or handed to the
event loop: no work on the loop at all for it. Only an id this engine published is
dropped; a message from another installation of the same inbox (same sender, an id
this process never made) passes to ingest as before.
"""

from __future__ import annotations

import threading
from typing import Final


class Echoes:
    """Raw ids of messages this engine is publishing or has published, until the
    stream echoes them (at most `LIMIT`, the oldest forgotten first: a stream that
    skipped an echo must not make the set grow). Filled on libxmtp's worker thread
    before the publication starts, so an id is in before its echo can arrive."""

    LIMIT: Final = 4096

    def __init__(self, inbox_id: str) -> None:
        self._inbox_id = inbox_id
        self._ids: dict[bytes, None] = {}
        self._lock = threading.Lock()

    def add(self, message_id: bytes) -> None:
        """Note a message about to be published."""
        with self._lock:
            self._ids[message_id] = None
            if len(self._ids) > self.LIMIT:
                del self._ids[next(iter(self._ids))]

    def take(self, sender_inbox_id: str, message_id: bytes) -> bool:
        """Whether a streamed message is the echo of one of these sends (asked once
        per message: a second echo of the same id passes)."""
        if sender_inbox_id != self._inbox_id:
            return False  # a peer's message: no lock taken
        with self._lock:
            return self._ids.pop(message_id, False) is None


__all__ = ["Echoes"]
