"""libxmtp's conversation listing, made to find each conversation's newest message by
index instead of by numbering every stored message.

libxmtp 1.10 lists conversations through its view `conversation_list` (cone's listing,
and libxmtp's own inside every sync of all conversations). Its `ranked_messages`
numbers every stored message of every conversation, newest first, and keeps number 1:
SQLite reads each stored message whole, its bytes included, at every listing. At
1,000,000 stored messages one listing took 14–16 s, and a start took three (docs/bench.md,
"libxmtp's conversation listing").

`ours` gives the same rows in the same order: for each conversation, the newest
message of the kinds and content types the original keeps, found by walking libxmtp's
own index on (group_id, sent_at_ns) from its newest end, and among messages sent at
that same time the one stored first, as SQLite's sort for the original's numbering
picks it. 0.16 s at 1,000,000.

cone replaces the view only when its text is exactly `ORIGINAL` (libxmtp 1.10's), and
puts `ORIGINAL` back before another libxmtp build opens the database (as it drops its
index, cone/engine/_cursor_index.py), so libxmtp's migrations always meet libxmtp's
own view. A libxmtp that defines the view otherwise keeps its own.
"""

from __future__ import annotations

from typing import Final

NAME: Final = "conversation_list"

#: libxmtp 1.10's view, as its migration wrote it (sqlite_master keeps the text).
ORIGINAL: Final = """CREATE VIEW conversation_list AS
WITH ranked_messages AS (
    SELECT
        gm.group_id,
        gm.id AS message_id,
        gm.decrypted_message_bytes,
        gm.sent_at_ns,
        gm.kind AS message_kind,
        gm.sender_installation_id,
        gm.sender_inbox_id,
        gm.delivery_status,
        gm.content_type,
        gm.version_major,
        gm.version_minor,
        gm.authority_id,
        gm.sequence_id,
        gm.originator_id,
        ROW_NUMBER() OVER (PARTITION BY gm.group_id ORDER BY gm.sent_at_ns DESC) AS row_num
    FROM
        group_messages gm
    WHERE
        gm.kind = 1
        AND gm.content_type IN (0, 1, 4, 6, 7, 8, 9, 10) -- 10 is added here
)
SELECT
    g.id AS id,
    g.created_at_ns,
    g.membership_state,
    g.installations_last_checked,
    g.added_by_inbox_id,
    g.sequence_id as welcome_sequence_id,
    g.dm_id,
    g.rotated_at_ns,
    g.conversation_type,
    g.is_commit_log_forked,
    rm.message_id,
    rm.decrypted_message_bytes,
    rm.sent_at_ns,
    rm.message_kind,
    rm.sender_installation_id,
    rm.sender_inbox_id,
    rm.delivery_status,
    rm.content_type,
    rm.version_major,
    rm.version_minor,
    rm.authority_id,
    rm.sequence_id,
    rm.originator_id
FROM
    groups g
    LEFT JOIN ranked_messages rm
    ON g.id = rm.group_id AND rm.row_num = 1
ORDER BY COALESCE(rm.sent_at_ns, g.created_at_ns) DESC"""

#: What marks cone's text (then the libxmtp build that made it).
MARK: Final = "-- cone:"


def ours(build: str) -> str:
    """cone's view for the libxmtp build `build`."""
    return f"""CREATE VIEW conversation_list AS
{MARK}{build}: each conversation's newest message by libxmtp's index (cone/engine/_listing_view.py)
SELECT
    g.id AS id,
    g.created_at_ns,
    g.membership_state,
    g.installations_last_checked,
    g.added_by_inbox_id,
    g.sequence_id as welcome_sequence_id,
    g.dm_id,
    g.rotated_at_ns,
    g.conversation_type,
    g.is_commit_log_forked,
    rm.id AS message_id,
    rm.decrypted_message_bytes,
    rm.sent_at_ns,
    rm.kind AS message_kind,
    rm.sender_installation_id,
    rm.sender_inbox_id,
    rm.delivery_status,
    rm.content_type,
    rm.version_major,
    rm.version_minor,
    rm.authority_id,
    rm.sequence_id,
    rm.originator_id
FROM
    groups g
    LEFT JOIN group_messages rm ON rm.rowid = (
        SELECT m.rowid FROM group_messages m
        WHERE m.group_id = g.id
          AND m.kind = 1
          AND m.content_type IN (0, 1, 4, 6, 7, 8, 9, 10)
          AND m.sent_at_ns = (
            SELECT n.sent_at_ns FROM group_messages n
            WHERE n.group_id = g.id
              AND n.kind = 1
              AND n.content_type IN (0, 1, 4, 6, 7, 8, 9, 10)
            ORDER BY n.sent_at_ns DESC
            LIMIT 1
          )
        ORDER BY m.rowid
        LIMIT 1
    )
ORDER BY COALESCE(rm.sent_at_ns, g.created_at_ns) DESC"""


__all__ = ["MARK", "NAME", "ORIGINAL", "ours"]
