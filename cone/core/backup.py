"""Backup while running: a consistent snapshot of cone's store and libxmtp's database.

libxmtp's database is copied while libxmtp has released it (its WAL checkpointed),
with ingest and sends held and every pending send key prepared in libxmtp, so the
copy is one consistent state of the same installation in which each pending key has
its message id (a restored copy publishes that same id: docs/backup.md). A
message that arrives in that short window is not lost: streams resume and the
catch-up re-reads libxmtp's database afterwards, as after any stream gap.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol

from cone._fs import free_bytes
from cone.core.intake.ingest import Ingestor
from cone.core.outbox import Outbox
from cone.engine.port import Identified
from cone.engine.roles.database import LocalDatabase
from cone.errors import ConeError, StateError, Unavailable
from cone.store import Store
from cone.store.backup import Manifest, write_backup

log = logging.getLogger(__name__)

RELEASE_TIMEOUT_S = 10.0


class BackupRoles(Identified, LocalDatabase, Protocol):
    """What a backup uses of the engine: whose it is, and libxmtp's database let go."""


class BackupMaker:
    """Makes backup files for one running identity."""

    def __init__(
        self, store: Store, engine: BackupRoles, ingestor: Ingestor, outbox: Outbox, xmtp_db: Path
    ) -> None:
        self._store = store
        self._engine = engine
        self._ingestor = ingestor
        self._outbox = outbox
        self._xmtp_db = xmtp_db

    def _xmtp_files(self) -> dict[str, Path]:
        files = {}
        for suffix in ("", ".sqlcipher_salt"):
            path = Path(str(self._xmtp_db) + suffix)
            if path.exists():
                files[self._xmtp_db.name + suffix] = path
        return files

    async def _released(self) -> None:
        """Wait until libxmtp's last connection closed: its write-ahead log is gone
        (checkpointed into the database), so the database file alone is the state."""
        wal = Path(str(self._xmtp_db) + "-wal")
        deadline = time.monotonic() + RELEASE_TIMEOUT_S
        while wal.exists():  # noqa: ASYNC240  # a stat of a local file; nothing to await
            if time.monotonic() > deadline:
                raise Unavailable(
                    "libxmtp did not release its database in time; try the backup again",
                    reason="backup_busy",
                )
            await asyncio.sleep(0.02)

    def _check_room(self) -> None:
        """Refuse at once, before libxmtp lets go of its database, when the state
        directory's disk cannot hold the backup's temporary file (about the size of
        both databases): on a full disk libxmtp could not reopen it."""
        home = self._xmtp_db.parent
        needed = sum(
            p.stat().st_size
            for p in home.iterdir()
            if p.name.startswith(("cone.db", self._xmtp_db.name)) and p.is_file()
        )
        free = free_bytes(home)
        if free < needed:
            raise StateError(
                f"the disk holding {home} has {free} bytes free; the backup is written there "
                f"first and needs about {needed}: free space and try again",
                reason="storage_full",
            )

    @asynccontextmanager
    async def backup(self, passphrase: str) -> AsyncIterator[tuple[Path, Manifest]]:
        """A finished backup file in the state directory, removed when the block ends."""
        self._check_room()
        fd, name = tempfile.mkstemp(prefix=".backup-", suffix=".cone", dir=self._xmtp_db.parent)
        os.close(fd)
        path = Path(name)
        try:
            # Sends held first, each pending key prepared (Outbox.held), then ingest.
            async with self._outbox.held(), self._ingestor.held():
                await self._engine.release_db()
                try:
                    await self._released()
                    manifest = await self._store.read(
                        write_backup,
                        path,
                        passphrase,
                        identity=(self._engine.inbox_id, self._engine.installation_id),
                        files=self._xmtp_files(),
                        created_ns=time.time_ns(),
                    )
                finally:
                    try:
                        await self._engine.reconnect_db()
                    except ConeError as exc:
                        # The engine keeps reopening it; the backup's own outcome stands.
                        log.warning("libxmtp's database not reopened yet: %s", exc.message)
            self._ingestor.mark_all()
            yield path, manifest
        finally:
            path.unlink(missing_ok=True)  # noqa: ASYNC240  # a local temp file: instant
