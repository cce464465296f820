"""Work on libxmtp's database file in a child process, as the engine asks for it.

cone/store/xmtp_database.py does that work (it is the store's: SQLCipher only behind
cone/store) in a child, never in a process where libxmtp has the file open. The
daemon hands that module to `Engine.open`, which passes it to the parts that need it
(`_cursor_index`, `_stamps`): the engine never imports the store.
"""

from __future__ import annotations

from typing import Any, Protocol


class DatabaseChild(Protocol):
    """Runs a request on libxmtp's database file in a child process."""

    @property
    def CHILD_GRACE_S(self) -> float:  # the module constant it names
        """How long a child may take beyond its work's own bound."""
        ...

    def run(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The request's outcome, or {"error": why}, within `timeout_s`."""
        ...


__all__ = ["DatabaseChild"]
