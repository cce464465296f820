"""How far the start's full reconciliation has compared each conversation.

The start's pass compares libxmtp's messages with the ids cone has read
(cone/core/intake/reconciliation.py). Once a conversation's pass has succeeded, everything
libxmtp stored in it before that pass began is in cone's inbox, and cone's inbox only
grows; so the next start's pass reads from where this one began instead of from the
first message. Each row says, for one conversation:

- `through_ns`: libxmtp's insert stamps up to which a pass found cone complete (the
  wall clock when that pass began reading, less the read margin).
- `whole_ns`: the wall clock when the last pass that read the whole conversation
  began (a pass reads the whole of it again when that is long ago).

A row lost in a crash before its commit only makes a later pass read more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from cone.store._db import Connection


class Mark(NamedTuple):
    """A conversation's reconciliation mark (see the module docstring)."""

    through_ns: int
    whole_ns: int


def marks(conn: Connection) -> dict[str, Mark]:
    """Every conversation's mark (a conversation with none was never compared)."""
    rows = conn.execute("SELECT conversation_id, through_ns, whole_ns FROM reconciled")
    return {str(cid): Mark(int(through), int(whole)) for cid, through, whole in rows}


def record(conn: Connection, found: Mapping[str, Mark]) -> None:
    """Keep the marks of conversations whose pass succeeded."""
    conn.executemany(
        "INSERT INTO reconciled (conversation_id, through_ns, whole_ns) VALUES (?, ?, ?)"
        " ON CONFLICT (conversation_id) DO UPDATE"
        " SET through_ns = excluded.through_ns, whole_ns = excluded.whole_ns",
        [(cid, mark.through_ns, mark.whole_ns) for cid, mark in found.items()],
    )


__all__ = ["Mark", "marks", "record"]
