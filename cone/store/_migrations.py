"""Schema migrations: `user_version` climbs one step at a time, each in one transaction."""

from __future__ import annotations

from typing import Final

from cone.errors import StateError
from cone.store._db import Connection

# Each entry takes the schema from version i to i+1. Never edit a released step;
# append a new one.
MIGRATIONS: Final[list[str]] = [
    # 0 -> 1: the initial schema.
    """
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value BLOB NOT NULL
    ) WITHOUT ROWID;

    -- consent: 1 requested, 2 accepted, 3 blocked. type: 1 dm, 2 group.
    CREATE TABLE conversations (
        id            TEXT PRIMARY KEY,
        type          INTEGER NOT NULL,
        peer_inbox_id TEXT NOT NULL,
        consent       INTEGER NOT NULL,
        first_seen_ns INTEGER NOT NULL,
        ingested_ns   INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;

    -- Each XMTP message once; seq is the local order consumers see.
    CREATE TABLE messages (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        id              TEXT NOT NULL UNIQUE,
        conversation_id TEXT NOT NULL REFERENCES conversations(id),
        sender_inbox_id TEXT NOT NULL,
        sent_at_ns      INTEGER NOT NULL,
        content_type    TEXT NOT NULL,
        text            TEXT,
        data_json       TEXT,
        reply_to        TEXT,
        fallback        TEXT,
        send_key        TEXT
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id, seq);
    -- A peer's repeat of the same send key is dropped on ingest.
    CREATE UNIQUE INDEX messages_by_sender_key ON messages(sender_inbox_id, send_key)
        WHERE send_key IS NOT NULL;

    -- Per-consumer delivery counts and acknowledgements.
    CREATE TABLE receipts (
        consumer   TEXT NOT NULL,
        seq        INTEGER NOT NULL REFERENCES messages(seq),
        deliveries INTEGER NOT NULL DEFAULT 0,
        acked_ns   INTEGER,
        PRIMARY KEY (consumer, seq)
    ) WITHOUT ROWID;

    CREATE TABLE consumers (
        name       TEXT PRIMARY KEY,
        created_ns INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE blocked_inboxes (
        inbox_id   TEXT PRIMARY KEY,
        blocked_ns INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE contacts (
        inbox_id        TEXT PRIMARY KEY,
        name            TEXT UNIQUE,
        address         TEXT,
        conversation_id TEXT NOT NULL
    ) WITHOUT ROWID;

    -- Send keys: the first payload and conversation, persisted before publication.
    CREATE TABLE outbox (
        key             TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        destination     TEXT NOT NULL,
        content_type    TEXT NOT NULL,
        payload         BLOB NOT NULL,
        message_id      TEXT,
        state           TEXT NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        last_error      TEXT,
        next_attempt_ns INTEGER,
        created_ns      INTEGER NOT NULL,
        settled_ns      INTEGER
    ) WITHOUT ROWID;
    CREATE INDEX outbox_unsettled ON outbox(state, next_attempt_ns) WHERE state != 'settled';
    """,
    # 1 -> 2: ingest by id. A message cone could not read keeps why; every message id
    # cone read from libxmtp and chose not to deliver is remembered, so that cone's
    # count per conversation can be compared with libxmtp's. `ingested_ns` now holds
    # the wall clock (less a margin) at the start of the last complete read.
    """
    ALTER TABLE messages ADD COLUMN unreadable TEXT;

    -- Ids read from libxmtp and not delivered: own messages, protocol-only content,
    -- a repeated send key.
    CREATE TABLE ingest_skipped (
        id              TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX ingest_skipped_by_conversation ON ingest_skipped(conversation_id);
    """,
    # 2 -> 3: XMTP content both ways. A reaction and the JSON of structured types
    # (transaction reference, wallet send calls, actions, intent) are kept on the
    # message; attachments in their own table, inline bytes or a remote reference
    # (its key material included: the store is encrypted) until downloaded.
    # attachments_kind: NULL none, 1 one file, 2 a list (multi remote attachment).
    """
    ALTER TABLE messages ADD COLUMN reaction_json TEXT;
    ALTER TABLE messages ADD COLUMN content_json TEXT;
    ALTER TABLE messages ADD COLUMN attachments_kind INTEGER;

    CREATE TABLE attachments (
        message_id      TEXT NOT NULL,
        idx             INTEGER NOT NULL,
        filename        TEXT NOT NULL,
        mime_type       TEXT NOT NULL,
        size            INTEGER,
        sha256          TEXT,
        data            BLOB,
        remote_json     TEXT,
        error           TEXT,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_ns INTEGER,
        PRIMARY KEY (message_id, idx)
    );
    CREATE INDEX attachments_to_fetch ON attachments(next_attempt_ns)
        WHERE data IS NULL AND remote_json IS NOT NULL;

    -- A reaction or reply to this identity's own message names it as the sender.
    CREATE INDEX outbox_by_message ON outbox(message_id) WHERE message_id IS NOT NULL;
    """,
    # 3 -> 4: history, groups, deletions and disappearing messages. A message whose
    # sender deleted it, or whose conversation's disappearing setting expired it,
    # keeps its row (its id stays known to ingest, a consumer can still ack it) with
    # its content cleared and `removed` saying why.
    """
    ALTER TABLE messages ADD COLUMN removed TEXT;
    ALTER TABLE messages ADD COLUMN removed_ns INTEGER;
    -- History pages in the conversation's order: sent time, then id.
    CREATE INDEX messages_by_history ON messages(conversation_id, sent_at_ns, id);
    CREATE INDEX outbox_by_history ON outbox(conversation_id, created_ns, message_id)
        WHERE message_id IS NOT NULL;
    CREATE INDEX conversations_by_first_seen ON conversations(first_seen_ns, id);
    -- Messages whose content is still held, by time: what disappearing settings expire.
    CREATE INDEX messages_live_by_time ON messages(conversation_id, sent_at_ns)
        WHERE removed IS NULL;
    -- An own message expired by its conversation's disappearing setting.
    ALTER TABLE outbox ADD COLUMN expired_ns INTEGER;
    -- Set when this identity leaves a group: the last inbox sequence delivered from it.
    ALTER TABLE conversations ADD COLUMN left_seq INTEGER;

    -- A peer's deleteMessage, kept until (and after) the message it names arrives.
    CREATE TABLE deletions (
        message_id      TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        sender_inbox_id TEXT NOT NULL,
        received_ns     INTEGER NOT NULL
    ) WITHOUT ROWID;

    -- Each conversation's disappearing-message setting, as libxmtp last reported it.
    CREATE TABLE disappearing (
        conversation_id TEXT PRIMARY KEY,
        from_ns         INTEGER NOT NULL,
        in_ns           INTEGER NOT NULL
    ) WITHOUT ROWID;

    -- createGroup keys: claimed before libxmtp makes the group, like send keys.
    CREATE TABLE group_keys (
        key         TEXT PRIMARY KEY,
        request     TEXT NOT NULL,
        group_id    TEXT,
        state       TEXT NOT NULL,
        last_error  TEXT,
        created_ns  INTEGER NOT NULL,
        settled_ns  INTEGER
    ) WITHOUT ROWID;
    """,
    # The reason code of an outbox entry's last failure (errors' stable `reason`), so
    # status and /metrics report why without reading the sentence.
    """
    ALTER TABLE outbox ADD COLUMN last_reason TEXT;
    """,
    # What a listing shows of a conversation that only libxmtp knows, as cone last read
    # it, and the group updates taken in since (cone/store/details.py).
    """
    CREATE TABLE details (
        conversation_id TEXT PRIMARY KEY,
        changes         INTEGER NOT NULL DEFAULT 0,
        read_changes    INTEGER,
        name            TEXT,
        description     TEXT,
        image_url       TEXT,
        member_count    INTEGER,
        active          INTEGER
    ) WITHOUT ROWID;
    """,
    # How far the start's full reconciliation compared each conversation
    # (cone/store/reconciled.py).
    """
    CREATE TABLE reconciled (
        conversation_id TEXT PRIMARY KEY,
        through_ns      INTEGER NOT NULL,
        whole_ns        INTEGER NOT NULL
    ) WITHOUT ROWID;
    """,
    # Each conversation's last activity, the listing's order (cone/store/history.py):
    # the latest of when cone first saw it, its newest message taken in, and its newest
    # own message. Kept by triggers on every write that moves it, so that a page is one
    # range of an index, and no writer has to remember it.
    """
    ALTER TABLE conversations ADD COLUMN activity_ns INTEGER NOT NULL DEFAULT 0;
    UPDATE conversations SET activity_ns = max(
        first_seen_ns,
        coalesce((SELECT max(m.sent_at_ns) FROM messages m
                  WHERE m.conversation_id = conversations.id), 0),
        coalesce((SELECT max(o.created_ns) FROM outbox o
                  WHERE o.conversation_id = conversations.id AND o.message_id IS NOT NULL), 0));
    CREATE INDEX conversations_by_activity ON conversations(activity_ns, id);
    CREATE TRIGGER conversation_activity_seen AFTER INSERT ON conversations BEGIN
        UPDATE conversations SET activity_ns = max(activity_ns, NEW.first_seen_ns)
        WHERE id = NEW.id;
    END;
    CREATE TRIGGER conversation_activity_message AFTER INSERT ON messages BEGIN
        UPDATE conversations SET activity_ns = max(activity_ns, NEW.sent_at_ns)
        WHERE id = NEW.conversation_id;
    END;
    CREATE TRIGGER conversation_activity_own AFTER INSERT ON outbox
    WHEN NEW.message_id IS NOT NULL BEGIN
        UPDATE conversations SET activity_ns = max(activity_ns, NEW.created_ns)
        WHERE id = NEW.conversation_id;
    END;
    CREATE TRIGGER conversation_activity_own_id AFTER UPDATE OF message_id ON outbox
    WHEN NEW.message_id IS NOT NULL AND OLD.message_id IS NULL BEGIN
        UPDATE conversations SET activity_ns = max(activity_ns, NEW.created_ns)
        WHERE id = NEW.conversation_id;
    END;
    """,
]


def migrate(conn: Connection) -> int:
    """Bring the schema up to date; returns the version. A newer file is refused."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > len(MIGRATIONS):
        raise StateError(
            f"the store has schema version {version}, newer than this cone knows "
            f"({len(MIGRATIONS)}): upgrade cone",
            reason="state_error",
        )
    while version < len(MIGRATIONS):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            # SQLite may have rolled back already (a full disk does): the error stands.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        version += 1
    return int(version)


def _split(script: str) -> list[str]:
    """Statements of a migration script: split at semicolons, except inside a trigger's
    body (from `CREATE TRIGGER` to its `END`); no other statement holds one."""
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    statements: list[str] = []
    trigger: list[str] = []
    for part in (s.strip() for s in "\n".join(lines).split(";")):
        if not part:
            continue
        if trigger or part.upper().startswith("CREATE TRIGGER"):
            trigger.append(part)
            if part.upper() == "END":
                statements.append(";\n".join(trigger))
                trigger = []
            continue
        statements.append(part)
    return statements
