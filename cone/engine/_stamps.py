"""Each conversation's newest insert stamp in libxmtp's database, in one read.

A start reads each conversation from where cone's last complete read of it began,
and its full reconciliation from where the last pass found cone complete: at 10,000
conversations each was 10,000 libxmtp queries, nearly all finding nothing, 8–11 s of
both cores at every restart (docs/bench.md, "A restart reads what was stored since").
One query along libxmtp's index on (group_id, inserted_at_ns) gives every
conversation's newest stamp, and a read that would start at or above it has nothing
to find. libxmtp 1.10 has no call for it: the query runs in a child process
(cone/store/xmtp_database.py says why), which starts in about 30 ms.
"""

from __future__ import annotations

import functools
import logging
import time
from pathlib import Path
from typing import Final

from cone.engine._calls import Calls
from cone.engine._children import DatabaseChild
from cone.engine.values import NewestStamps
from cone.errors import ConeError

log = logging.getLogger(__name__)

#: The longest the read may take in the child (0.9 s at 1,000,000 messages, cold).
READ_S: Final = 30.0


class Stamps:
    """Reads the newest stamps of one identity's libxmtp database at `path`."""

    def __init__(self, path: Path, key: bytes, calls: Calls, child: DatabaseChild) -> None:
        self._child = child
        self._path = path
        self._key = key
        self._x = calls

    async def read(self) -> NewestStamps | None:
        """Every conversation's newest stamp, or None (logged) when they could not be
        read: the caller then reads each conversation as it would without them."""
        request = {
            "action": "newest", "path": str(self._path), "key": self._key.hex(),
            "bound_s": READ_S,
        }  # fmt: skip
        taken = time.time_ns()
        try:
            outcome = await self._x.call_sync(
                functools.partial(self._child.run, request, READ_S + self._child.CHILD_GRACE_S),
                READ_S + 2 * self._child.CHILD_GRACE_S,
                "reading libxmtp's newest stamps",
            )
        except ConeError as err:
            outcome = {"error": err.message}
        if "error" in outcome:
            log.warning(
                "libxmtp's newest stamps not read (%s): reading each conversation", outcome["error"]
            )
            return None
        return NewestStamps(taken, outcome["newest"])


__all__ = ["READ_S", "Stamps"]
