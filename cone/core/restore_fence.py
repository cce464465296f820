"""A restored copy's first send in each conversation waits until it is known safe.

A backup is an installation's MLS state at one moment. If the original went on
after it, the network holds what the original did that the restored copy's state
does not: messages sent with sending keys this copy would use again (peers drop
those), and commits that moved the group to an epoch this copy cannot reach.
`cone restore` makes libxmtp's key update due in every group (cone/store/backup.py),
and before the copy's first send in a conversation the fence publishes it
(`rotate_keys`): a commit, after which no key the original used is used again. That
holds only where the copy's state is the group's current epoch, so first the
conversation is synced (libxmtp takes in everything the network holds since the
backup) and its commit log read: a commit of this installation's own that libxmtp
could not apply means the original moved the group on after the backup, and anything
this copy encrypts there is lost to the members.
Such a conversation is refused with `restore_forked`, never reported as sent
(docs/backup.md).
"""

from __future__ import annotations

import json
import logging
from typing import Final

from cone.engine.roles.sync import Sync
from cone.errors import ConeError, FailedPrecondition
from cone.store import Store, meta
from cone.store.backup import RESTORE_DUE, RESTORED_KEY

log = logging.getLogger(__name__)

#: The reason of a send refused because the original moved the conversation on.
RESTORE_FORKED: Final = "restore_forked"


class RestoreFence:
    """Makes each conversation a restored copy held at its restore safe before its
    first send there, once (`cone restore` marks them due: cone/store/backup.py);
    conversations made since are not checked."""

    def __init__(self, store: Store, engine: Sync) -> None:
        self._store = store
        self._engine = engine
        self._restored: bool | None = None  # read from the store at the first use
        self._done: set[str] = set()  # not due (any more) in this process
        self._forked: set[str] = set()

    async def _is_restored(self) -> bool:
        if self._restored is None:
            mark = await self._store.read(meta.get, RESTORED_KEY)
            self._restored = mark is not None
            if mark is not None:
                log.info("restored from a backup (%s)", json.loads(mark))
        return self._restored

    @property
    def forked(self) -> int:
        """How many conversations this process found moved on by the original."""
        return len(self._forked)

    async def check(self, conversation_id: str) -> None:
        """Return when sending into `conversation_id` is safe; FailedPrecondition
        (`restore_forked`) when it never will be from this installation. A sync that
        fails raises as the sync's failure (the send waits in the outbox)."""
        if conversation_id in self._done or not await self._is_restored():
            return
        if conversation_id not in self._forked:
            if await self._store.read(meta.get, RESTORE_DUE + conversation_id) is None:
                self._done.add(conversation_id)
                return
            await self._engine.sync_conversation(conversation_id)
            await self._judge(conversation_id)
        if conversation_id in self._forked:
            raise FailedPrecondition(
                f"conversation {conversation_id} was moved on by this identity's original "
                "installation after the backup this copy was restored from (a commit this "
                "copy cannot apply): what it sent there would be lost to the other members. "
                "Restore a backup taken after that, or have a member remove and re-add this "
                "installation (docs/backup.md)",
                reason=RESTORE_FORKED,
            )
        await self._engine.rotate_keys(conversation_id)
        await self._store.write(meta.remove, RESTORE_DUE + conversation_id)
        self._done.add(conversation_id)

    async def sweep(self) -> None:
        """Judge every conversation still due, just after the start's first sync, so
        what the original moved on is reported at start, not only at a send."""
        if not await self._is_restored():
            return
        for conversation_id in await self._store.read(meta.keys_with_prefix, RESTORE_DUE):
            if conversation_id in self._forked:
                continue
            try:
                await self._judge(conversation_id)
            except ConeError as exc:  # judged again at its first send
                log.debug("restore check of %s: %s", conversation_id, exc.message)

    async def _judge(self, conversation_id: str) -> None:
        lost = await self._engine.own_commits_lost(conversation_id)
        if lost:
            self._forked.add(conversation_id)
            log.warning(
                "conversation %s: the original installation made %d commit(s) there after "
                "the backup; this restored copy cannot send or read there (%s)",
                conversation_id,
                lost,
                RESTORE_FORKED,
            )
