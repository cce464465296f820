"""An index on libxmtp's messages that libxmtp 1.10 lacks, without which subscribing a
message stream in a big store reads every stored message.

Each time libxmtp subscribes a message stream over many conversations (cone's
"messages" stream: at the start, after a fault, and when `Regrouping` takes in the
conversations accepted meanwhile), it first looks for messages above each
conversation's cursor (xmtp_db's `messages_newer_than`): for each 100 conversations,
one query whose terms read `group_id = ? AND (originator_id = ? AND sequence_id > ?
OR … OR originator_id NOT IN (…))`. libxmtp's indexes on `group_id` cover neither
column, so SQLite reads every message of every conversation from the table: 10 s at
1,000,000 stored messages, during which libxmtp handed over no message on any stream
(docs/bench.md, "A stream subscribing again reads every stored message"). With an
index on (group_id, originator_id, sequence_id) the same query reads index entries
only: 0.28 s.

The index is cone's, in libxmtp's database, named for the libxmtp build that made it.
libxmtp's migrations change these columns (one of 2025 dropped both and added them
back), and SQLite refuses to drop an indexed column: so before libxmtp opens its
database, `drop_stale` drops an index made under another build, and once libxmtp has
opened it (its migrations done), `make` makes the index of this build. Making it reads
every message once (2.3 s at 1,000,000), once per libxmtp build, and gives up after
`MAKE_S`: libxmtp then works as it would without it. Neither ever fails the opening.
Both run in a child process (cone/store/xmtp_database.py says why), which stops,
rolled back, once the daemon's process has ended. The same two steps keep cone's text
of libxmtp's conversation listing view (cone/engine/_listing_view.py): put back to
libxmtp's before another build opens the database, made once this build has.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Final

from cone.engine import _listing_view
from cone.engine._children import DatabaseChild
from cone.engine._version import versions

log = logging.getLogger(__name__)

#: The longest `make` may take before it gives up (seconds).
MAKE_S: Final = 60.0
#: The longest dropping a stale index may take (it frees, and overwrites, its pages).
DROP_S: Final = 30.0
PREFIX: Final = "cone_messages_cursor_"


def index_name() -> str:
    """The index's name for the libxmtp build this process runs."""
    info = versions()
    build = info["libxmtpCommit"] or info["xmtpBindings"]
    return PREFIX + re.sub(r"[^0-9A-Za-z]", "_", build)


def _request(action: str, path: Path, key: bytes, **more: object) -> dict[str, object]:
    name = index_name()
    view = {
        "name": _listing_view.NAME, "original": _listing_view.ORIGINAL,
        "ours": _listing_view.ours(name.removeprefix(PREFIX)), "mark": _listing_view.MARK,
    }  # fmt: skip
    return {
        "action": action, "path": str(path), "key": key.hex(), "prefix": PREFIX,
        "name": name, "view": view, **more,
    }  # fmt: skip


def drop_stale(path: Path, key: bytes, child: DatabaseChild) -> bool:
    """Before libxmtp opens its database: drop an index of cone's made under another
    libxmtp build, so that its migrations meet libxmtp's own schema. True when this
    build's index is there already (False too when there is no database yet)."""
    if not path.exists():
        return False
    outcome = child.run(_request("drop_stale", path, key), DROP_S)
    if "error" in outcome:
        # A bad file is libxmtp's own opening to report, with advice.
        log.debug("libxmtp's database not checked for stale indexes: %s", outcome["error"])
        return False
    for name in outcome["dropped"]:
        log.info("dropped %s from libxmtp's database: made under another libxmtp build", name)
    # Nothing for `make` to do: the index is there, and the view is cone's or not 1.10's.
    return bool(outcome["has"]) and outcome.get("view") != "original"


def make(path: Path, key: bytes, child: DatabaseChild) -> bool:
    """Once libxmtp has opened its database: make the index. True when it is there."""
    bound = MAKE_S
    outcome = child.run(_request("make", path, key, bound_s=bound), bound + child.CHILD_GRACE_S)
    if "error" in outcome:
        log.warning(
            "libxmtp's messages are not indexed by cursor (%s): subscribing a message "
            "stream in a big store stays slow",
            outcome["error"],
        )
        return False
    if outcome.get("view") == "foreign":
        log.debug("libxmtp's conversation listing view is not libxmtp 1.10's: left as it is")
    if outcome["made"]:
        took = float(outcome["seconds"])
        # Worth a line when a big store waited for it (an upgrade), not at a new identity.
        log.log(logging.INFO if took >= 1.0 else logging.DEBUG,
                "indexed libxmtp's messages by cursor in %.1f s", took)  # fmt: skip
    return True


__all__ = ["DROP_S", "MAKE_S", "PREFIX", "drop_stale", "index_name", "make"]
