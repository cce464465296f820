"""Whether a catch-up period takes a fresh conversation listing or keeps the last one.

A listing costs seconds in a big store (libxmtp 1.10's view read every stored message
to find each conversation's newest, docs/bench.md, "big store"; with cone's text of it,
cone/engine/_listing_view.py, 0.7 s at 10,000 conversations, most of it
converting the listing), and libxmtp's sync of every conversation already lists them
all once inside: an idle period paid for two listings. After each sync the catch-up
listed again for the `changed_only` ingest, which reads the conversations whose
newest listed message moved. libxmtp's sync summary says when there can be nothing
for that ingest to find: it counts the conversations it listed (`eligible`: every
one not denied, so a welcome adds one and a block takes one away), and the groups it
synced (`synced`), which are those the node had news for. A period whose sync synced
none and listed as many as the sync before the held listing keeps that listing; the
window check reads its turn of it (docs/guarantees.md, path 2, says what else can
bring a message in and how long the held listing may stand). A welcome and a block
in one period leave the count as it was: the conversation stream reports the
welcome at once, and the fresh listing every `EVERY` periods takes it otherwise.

A fresh listing is taken anyway every `EVERY` periods, and whenever the summary is
missing, a sync failed, or a stream restart or the cutover asked for one (`expire`).
"""

from __future__ import annotations

from typing import Final

from cone.core.intake.window_turns import ROUNDS
from cone.engine.port import SyncSummary

#: A held listing serves at most this many periods in a row: the window check's own
#: bound (each conversation is checked once every `ROUNDS` periods), so what only a
#: listing would show is found as soon as what only the window check would find.
EVERY: Final = ROUNDS


class Relisting:
    """Decides, after each catch-up sync, whether the period lists again."""

    def __init__(self, every: int = EVERY) -> None:
        self._every = every
        # The sync summary's `eligible` before the held listing was taken (None:
        # no listing to keep: the next period lists).
        self._eligible: int | None = None
        self._kept = 0  # periods in a row that kept it

    def needed(self, summary: SyncSummary | None) -> bool:
        """Whether the period whose sync reported `summary` needs a fresh listing."""
        return (
            summary is None
            or self._eligible is None
            or summary.synced > 0
            or summary.eligible != self._eligible
            or self._kept + 1 >= self._every
        )

    def listed(self, summary: SyncSummary | None) -> None:
        """A fresh listing was taken after the sync that reported `summary`, and read."""
        self._eligible = summary.eligible if summary is not None else None
        self._kept = 0

    def kept(self) -> None:
        """A period kept the held listing."""
        self._kept += 1

    def expire(self) -> None:
        """The next period lists afresh (a sync failed, a stream restarted, the cutover)."""
        self._eligible = None


__all__ = ["EVERY", "Relisting"]
