"""The bridge's own durable records, beside the identity in the state directory.

Under `HOME/bridge/CONSUMER/` (directory 0700, files 0600):

- `lock`: an exclusive flock held while a bridge runs for this consumer, so that two
  bridges never share one consumer's receipts.
- `turns.jsonl`: the open turns, one per conversation (the message ids the turn was
  formed from, its turn id, how many attempts have started), and the process id of
  each turn's running command. A log of checksummed lines (`CRC32 JSON`): the first
  holds the whole state, each later one a change (a conversation's open turn set or
  dropped, a command's pid set or dropped), so that a change costs one short line
  however many turns are open. A turn's change is fsynced before each attempt's
  command starts; its removal once the turn's messages are acknowledged, and pids,
  are not (see `Journal.finish`; an OS crash ends the commands anyway). The state is
  the lines replayed up to the first whose checksum fails: a line torn by a crash is
  the last one written, whose save never returned or was not synced, and the state
  before it stands. At start, and once the file passes `LOG_MAX_BYTES`, it is
  rewritten as one line (a new file, fsynced, renamed into place, the directory
  fsynced), so that appends only ever go to a file whose name is durable. After a
  crash, the first turn in that conversation is formed from the same messages
  again, so it keeps its turn id and reply key (the reply is not sent twice), and its
  attempts keep counting; the next start kills a command a `kill -9` of the bridge
  left behind, by its pid. (Earlier releases appended the whole state at each change,
  a line any later one replaces, and kept pids in `pids.json`; both are read once
  and replaced.)
- `parked.jsonl`: one JSON object per parked turn, appended and fsynced.

Nothing here holds message content: ids, counts and reasons only (the state
directory never holds plaintext messages; see docs/security.md).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cone._fs import open_nofollow
from cone.errors import StateError

log = logging.getLogger("cone.bridge")

#: The size past which the next save rewrites `turns.jsonl` as one line.
LOG_MAX_BYTES = 64 * 1024


@dataclass
class OpenTurn:
    """A turn whose messages are not acknowledged yet."""

    conversation_id: str
    turn_id: str
    message_ids: list[str]
    attempts: int = 0
    last_error: str | None = None


@dataclass(frozen=True)
class Parked:
    """A turn given up on after its last attempt; its messages are acknowledged."""

    parked_at: float
    consumer: str
    turn_id: str
    conversation_id: str
    conversation_type: str
    message_ids: list[str]
    attempts: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON form written to `parked.jsonl` and shown by `--parked`."""
        return {
            "parkedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.parked_at)),
            "consumer": self.consumer,
            "turnId": self.turn_id,
            "conversationId": self.conversation_id,
            "conversationType": self.conversation_type,
            "messageIds": self.message_ids,
            "attempts": self.attempts,
            "reason": self.reason,
        }


def bridge_dir(home: Path, consumer: str) -> Path:
    """Where the records of the bridge for `consumer` live."""
    return home / "bridge" / consumer


def _new_file(path: Path) -> int:
    """A fresh file at `path`: whatever was there (a planted link included) is removed,
    not followed."""
    path.unlink(missing_ok=True)
    return open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(path: Path) -> None:
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _line(state: dict[str, Any]) -> bytes:
    body = json.dumps(state, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _intact(line: bytes) -> dict[str, Any] | None:
    """A line's record when its checksum holds, else None."""
    crc, _, body = line.partition(b" ")
    try:
        if int(crc, 16) == zlib.crc32(body):
            record: dict[str, Any] = json.loads(body)
            return record
    except ValueError:
        pass
    return None


def _replayed(raw: bytes) -> dict[str, Any] | None:
    """The state the log's lines make, replayed up to the first that is not intact
    (what follows the last newline is torn too); None when the first is not."""
    state: dict[str, Any] | None = None
    for line in raw.split(b"\n")[:-1]:
        record = _intact(line)
        if record is None:
            break
        if "turns" in record:  # the whole state (the first line; every line, before)
            state = {"turns": record["turns"], "pids": record.get("pids", {})}
        elif state is None:
            break
        elif "turn" in record:
            state["turns"][record["turn"]["conversation_id"]] = record["turn"]
        elif "done" in record:
            state["turns"].pop(record["done"], None)
        elif "pid" in record:
            turn_id, pid = record["pid"]
            if pid is None:
                state["pids"].pop(turn_id, None)
            else:
                state["pids"][turn_id] = pid
    return state


def read_parked(home: Path, consumer: str) -> list[dict[str, Any]]:
    """The parked turns for `consumer`, oldest first (empty when none)."""
    path = bridge_dir(home, consumer) / "parked.jsonl"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line after a crash: the record was never complete
    return out


class Journal:
    """The open turns and the parked list of one consumer, held under its lock."""

    def __init__(self, home: Path, consumer: str) -> None:
        self.consumer = consumer
        self.dir = bridge_dir(home, consumer)
        self._lock_fd: int | None = None
        # `turns.jsonl`, open for appending, and how long it is.
        self._log_fd: int | None = None
        self._log_size = 0
        self.open_turns: dict[str, OpenTurn] = {}
        #: Turn id → process (group) id of its running command.
        self.pids: dict[str, int] = {}

    def acquire(self) -> None:
        """Create the directory, take the consumer's lock, load the open turns."""
        self.dir.parent.mkdir(mode=0o700, exist_ok=True)
        self.dir.mkdir(mode=0o700, exist_ok=True)
        fd = open_nofollow(self.dir / "lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateError(
                f"another bridge runs for consumer {self.consumer!r} on this identity: stop "
                "it, or give this one another --consumer",
                reason="locked",
            ) from None
        self._lock_fd = fd
        try:
            raw = self._load()
        except StateError:
            self.release()
            raise
        self.open_turns = {c: OpenTurn(**t) for c, t in raw.get("turns", {}).items()}
        pids = raw.get("pids", {})
        try:  # an earlier release's
            pids = {**json.loads((self.dir / "pids.json").read_text()), **pids}
        except (FileNotFoundError, ValueError):  # missing, or torn by an OS crash
            pass
        self.pids = {t: int(p) for t, p in pids.items() if isinstance(p, int)}
        try:
            self._compact()  # one line, and no torn tail for the next append to follow
        except OSError as exc:  # a full disk: the first save rewrites it (or fails its turn)
            log.warning("could not rewrite %s now: %s", self.dir / "turns.jsonl", exc)

    def _load(self) -> dict[str, Any]:
        log_path = self.dir / "turns.jsonl"
        try:
            raw = log_path.read_bytes()
        except FileNotFoundError:
            pass
        else:
            state = _replayed(raw)
            if state is None:
                raise StateError(
                    f"{log_path} holds no intact record: move it aside to start without it "
                    "(turns in progress then run again, possibly under new reply keys)",
                    reason="state_error",
                )
            return state
        path = self.dir / "turns.json"  # written by earlier releases
        try:
            old: dict[str, Any] = json.loads(path.read_text())
            return old
        except FileNotFoundError:
            return {}
        except ValueError:
            raise StateError(
                f"{path} is not valid JSON: move it aside to start without it (turns in "
                "progress then run again, possibly under new reply keys)",
                reason="state_error",
            ) from None

    def release(self) -> None:
        """Drop the lock."""
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def running(self, turn_id: str, pid: int | None) -> None:
        """Record (or with None, forget) the pid of a turn's running command."""
        if pid is None:
            if self.pids.pop(turn_id, None) is None:
                return
        else:
            self.pids[turn_id] = pid
        self._save({"pid": [turn_id, pid]}, sync=False)

    def _state(self) -> dict[str, Any]:
        return {"turns": {c: asdict(t) for c, t in self.open_turns.items()}, "pids": self.pids}

    def _save(self, change: dict[str, Any], sync: bool = True) -> None:
        """Append `change` and fsync once: durable when this returns (with `sync`;
        else in the kernel's hands, and durable with the next save that syncs)."""
        if self._log_fd is None or self._log_size > LOG_MAX_BYTES:
            self._compact()
            return
        line = _line(change)
        _write_all(self._log_fd, line)
        if sync:
            os.fsync(self._log_fd)
        self._log_size += len(line)

    def _turn_saved(self, turn: OpenTurn, sync: bool = True) -> None:
        self._save({"turn": asdict(turn)}, sync=sync)

    def _compact(self) -> None:
        """Rewrite `turns.jsonl` as the one line of the state: a new file, fsynced,
        renamed into place, the directory fsynced (then appends need one fsync)."""
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None
        line = _line(self._state())
        tmp = self.dir / "turns.jsonl.tmp"
        fd = _new_file(tmp)
        try:
            _write_all(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / "turns.jsonl")
        _fsync_dir(self.dir)
        for earlier in ("turns.json", "pids.json"):  # an earlier release's; superseded
            (self.dir / earlier).unlink(missing_ok=True)
        self._log_fd = open_nofollow(self.dir / "turns.jsonl", os.O_WRONLY | os.O_APPEND)
        self._log_size = len(line)

    def begin(
        self, conversation_id: str, turn_id: str, message_ids: list[str], *, sync: bool = True
    ) -> int:
        """Record that an attempt starts; returns its number (1 for the first). Without
        `sync` the line is written but not yet durable: sync `log_copy()` before the
        attempt's command starts."""
        turn = self.open_turns.get(conversation_id)
        if turn is None or turn.turn_id != turn_id:
            turn = OpenTurn(conversation_id, turn_id, list(message_ids))
            self.open_turns[conversation_id] = turn
        turn.attempts += 1
        self._turn_saved(turn, sync)
        return turn.attempts

    def log_copy(self) -> int | None:
        """A descriptor of `turns.jsonl` of its own (the caller closes it), for an
        fsync off the event loop: a rewrite meanwhile closes the journal's but not
        this one (and the rewrite is synced itself)."""
        return None if self._log_fd is None else os.dup(self._log_fd)

    def failed(self, conversation_id: str, error: str) -> None:
        """Remember why the last attempt failed (shown when the turn is parked)."""
        turn = self.open_turns.get(conversation_id)
        if turn is not None:
            turn.last_error = error
            self._turn_saved(turn)

    def withdraw(self, conversation_id: str) -> None:
        """An attempt stopped by the bridge's own shutdown does not count."""
        turn = self.open_turns.get(conversation_id)
        if turn is not None and turn.attempts > 0:
            turn.attempts -= 1
            self._turn_saved(turn)

    def finish(self, conversation_id: str) -> None:
        """The turn's messages are acknowledged: forget it. Not fsynced: losing this
        line to an OS crash leaves an open turn whose messages are acknowledged, which
        the next batch of its conversation finds stale (`_turns.plan`), the same as
        a crash just before it; the next save that syncs makes it durable too."""
        if self.open_turns.pop(conversation_id, None) is not None:
            self._save({"done": conversation_id}, sync=False)

    def park(self, record: Parked) -> None:
        """Append `record` to the parked list (fsynced). The caller acks, then `finish`es:
        a crash in between parks the turn again at the next start (listed twice)."""
        line = json.dumps(record.to_json()) + "\n"
        fd = open_nofollow(self.dir / "parked.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["Journal", "OpenTurn", "Parked", "bridge_dir", "read_parked"]
