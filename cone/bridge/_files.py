"""Attachments as files: each turn's attachments in a private directory of its own.

The command gets files, not base64: for every attachment of the turn's messages and
context whose bytes cone holds, the bridge writes the file into the turn's directory
and puts its `path` on the attachment object in the turn's JSON (dropping `data`).
The directory lives outside the state directory (nothing in a state directory holds
plaintext): under `$XDG_RUNTIME_DIR` when set (a per-user tmpfs), else the system's
temporary directory, in `cone-UID/BRIDGE/TURN_ID/`, every level `0700`. It is removed
when the turn ends, whatever the outcome; a crash leaves it until the bridge starts
again, which removes what is left.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cone.bridge._context import Caller
from cone.errors import ConeError
from conepb.v1 import cone_pb2 as pb

log = logging.getLogger("cone.bridge")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(filename: str) -> str:
    """A file name that stays inside its directory: the last path component, in ASCII
    letters, digits, `.`, `_`, `-`; no leading dot; at most 100 characters; `file`
    when nothing is left."""
    last = filename.replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE.sub("_", last).lstrip(".")[:100]
    return name or "file"


def files_root(home: Path | None, consumer: str) -> Path:
    """This bridge's directory of per-turn directories."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    tag = hashlib.sha256(f"{home}\0{consumer}".encode()).hexdigest()[:16]
    return Path(base) / f"cone-{os.getuid()}" / tag


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if path.is_symlink() or st.st_uid != os.getuid():
        raise OSError(f"{path} is not a private directory of this user")
    os.chmod(path, 0o700)


class TurnFiles:
    """Writes and removes the per-turn directories."""

    def __init__(self, caller: Caller, root: Path) -> None:
        self.caller = caller
        self.root = root

    def clean(self) -> None:
        """Remove every turn directory left behind (by a crash)."""
        shutil.rmtree(self.root, ignore_errors=True)

    def directory(self, turn_id: str) -> Path:
        """Where a turn's files go."""
        return self.root / turn_id

    def remove(self, turn_id: str) -> None:
        """The turn ended: remove its files."""
        shutil.rmtree(self.directory(turn_id), ignore_errors=True)

    async def write(self, turn_id: str, messages: list[dict[str, Any]]) -> Path | None:
        """Write the attachments of these messages (JSON form, changed in place to name
        their paths); returns the turn's directory, or None when it has no files."""
        todo: list[tuple[dict[str, Any], str, bytes]] = []
        for message in messages:
            files = list(message.get("attachments", []))
            if "attachment" in message:
                files.insert(0, message["attachment"])
            for index, entry in enumerate(files):
                data = await self._bytes(message["messageId"], index, entry)
                entry.pop("data", None)
                if data is not None:
                    name = f"{message.get('sequence', 0)}-{index}-"
                    todo.append((entry, name + safe_name(entry.get("filename", "")), data))
        if not todo:
            return None
        return await asyncio.to_thread(self._write_files, turn_id, todo)

    def _write_files(self, turn_id: str, todo: list[tuple[dict[str, Any], str, bytes]]) -> Path:
        _private_dir(self.root.parent)
        _private_dir(self.root)
        made = self.directory(turn_id)
        _private_dir(made)
        for entry, name, data in todo:
            path = made / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            entry["path"] = str(path)
        return made

    async def _bytes(self, message_id: str, index: int, entry: dict[str, Any]) -> bytes | None:
        if "data" in entry:
            try:
                return base64.b64decode(entry["data"])
            except (ValueError, binascii.Error):
                return None
        if "error" in entry:
            return None  # a remote file cone does not hold (yet): the error says why
        try:
            got = await self.caller.call(
                "Attachment", pb.AttachmentRequest(message_id=message_id, index=index), timeout=120
            )
        except ConeError as err:
            log.warning("attachment %d of %s not available: %s", index, message_id, err.message)
            return None
        data: bytes = got.data
        return data


__all__ = ["TurnFiles", "files_root", "safe_name"]
