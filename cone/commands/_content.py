"""What `cone send` sends: TEXT (plain or `--markdown`), a reaction (`--react MESSAGE
EMOJI`) or a file (`--file PATH`), one of them, as the `send` method's parameters."""

from __future__ import annotations

import argparse
import base64
import mimetypes
from pathlib import Path
from typing import Any

from cone.errors import InvalidArgument

JsonObject = dict[str, Any]


def content(args: argparse.Namespace) -> JsonObject:
    """What `cone send` sends: TEXT (plain or --markdown), --react or --file, one of them."""
    given = [args.text is not None, args.react is not None, args.file is not None]
    if given.count(True) != 1:
        raise InvalidArgument(
            "give one of TEXT, --react MESSAGE EMOJI and --file PATH", field="text"
        )
    if args.markdown and args.text is None:
        raise InvalidArgument("--markdown goes with TEXT", field="text")
    if args.react is not None:
        message_id, emoji = args.react
        return {"reaction": {"messageId": message_id, "emoji": emoji}}
    if args.file is not None:
        return {"attachment": _attachment(Path(args.file))}
    return {"markdown" if args.markdown else "text": args.text}


def _attachment(path: Path) -> JsonObject:
    """The file at `path` as an attachment (its size checked before it is read)."""
    from cone.rules import field_rules

    limit = field_rules("OutgoingAttachment", "data").bytes.max_len
    try:
        size = path.stat().st_size
        if size > limit:
            raise InvalidArgument(
                f"--file {path} is {size} bytes: an attachment is at most {limit} bytes",
                field="file",
            )
        data = path.read_bytes()
    except OSError as err:
        raise InvalidArgument(f"--file {path}: {err.strerror}", field="file") from None
    mime, _ = mimetypes.guess_type(path.name)
    return {
        "filename": path.name,
        "mimeType": mime or "application/octet-stream",
        "data": base64.b64encode(data).decode("ascii"),
    }


__all__ = ["content"]
