"""The database role: libxmtp's database let go and taken back (a backup copies its
files between), and its fake.

`Engine` is the real `LocalDatabase` (cone/engine/_database.py); `MemoryDatabase`
records whether it is let go, and refuses a second release as a mistake of the caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol


class LocalDatabase(Protocol):
    """libxmtp's database connection."""

    async def release_db(self) -> None:
        """Let go of libxmtp's database so its files can be copied."""
        ...

    async def reconnect_db(self) -> None:
        """Reopen libxmtp's database after `release_db`."""
        ...


class MemoryDatabase:
    """An in-memory `LocalDatabase`: `released` while let go; `releases` counts them."""

    def __init__(self) -> None:
        self.released = False
        self.releases = 0

    async def release_db(self) -> None:
        if self.released:
            raise RuntimeError("libxmtp's database is let go already")
        self.released = True
        self.releases += 1

    async def reconnect_db(self) -> None:
        self.released = False


if TYPE_CHECKING:  # each fake is checked against its role
    _0: type[LocalDatabase] = MemoryDatabase


__all__ = ["LocalDatabase", "MemoryDatabase"]
