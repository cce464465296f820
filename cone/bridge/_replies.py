"""What the command's stdout says: plain text, or a JSON reply object.

Plain text stays the default: stdout (trailing newlines removed) is one text reply.
stdout that is a JSON object with exactly one member, `reply` (one object) or
`replies` (a list of at most `MAX_REPLIES`), is read as structured replies, each with
exactly one of the `reply` method's content parameters:

    {"reply": {"markdown": "# Done\\n- **3** files"}}
    {"replies": [{"reaction": {"messageId": "<id>", "emoji": "👍"}},
                 {"attachment": {"path": "/srv/agent/out/chart.png", "mimeType": "image/png"}}]}

An attachment may name a `path` (read by the bridge; `filename` defaults to its base
name) instead of base64 `data`. Each reply is checked by the same schema as the
`reply` method; the first goes under the turn's key `reply:<turn id>`, the n-th
(from 0) under `reply:<turn id>:n`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Final

from cone.errors import InvalidArgument
from cone.rules import check, field_rules
from cone.schema import methods

MAX_REPLIES: Final = 10


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(f"the command's JSON reply: {message}", field="stdout")


def _structured(text: str) -> list[dict[str, Any]] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(value, dict) or len(value) != 1 or not {"reply", "replies"} & set(value):
        return None
    items = [value["reply"]] if "reply" in value else value["replies"]
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_REPLIES:
        raise _invalid(f"replies must be a list of 1–{MAX_REPLIES} objects")
    if not all(isinstance(item, dict) for item in items):
        raise _invalid("each reply must be an object")
    return items


def _with_file(item: dict[str, Any]) -> dict[str, Any]:
    attachment = item.get("attachment")
    if not isinstance(attachment, dict) or "path" not in attachment:
        return item
    attachment = dict(attachment)
    path = Path(str(attachment.pop("path")))
    most = field_rules("OutgoingAttachment", "data").bytes.max_len
    try:
        with path.open("rb") as f:
            data = f.read(most + 1)
    except OSError as exc:
        raise _invalid(f"cannot read attachment path {path}: {exc.strerror}") from None
    if len(data) > most:
        raise _invalid(f"{path} is over the {most}-byte attachment limit")
    attachment.setdefault("filename", path.name)
    attachment["data"] = base64.b64encode(data).decode("ascii")
    return {**item, "attachment": attachment}


def replies(stdout: bytes, conversation_id: str, key: str) -> list[Any]:
    """The ReplyRequests for a command's stdout (empty: no reply). InvalidArgument when a
    JSON reply object is malformed or a reply breaks the proto's rules: checked here as
    well as at the daemon, since a command's output may be too large for the wire to
    carry to the daemon's check at all."""
    text = stdout.decode("utf-8", errors="replace").rstrip("\r\n")
    items = _structured(text)
    if items is None:
        if not text.strip():
            return []
        items = [{"text": text}]
    method = methods()["reply"]
    out = []
    for n, item in enumerate(items):
        params = {**_with_file(item), "conversationId": conversation_id}
        params["key"] = key if n == 0 else f"{key}:{n}"
        request = method.to_request(params)
        check(request)
        out.append(request)
    return out


__all__ = ["MAX_REPLIES", "replies"]
