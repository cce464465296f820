"""An example agent for `cone bridge`: reads one turn on stdin, prints the reply.

    cone bridge --reactions -- python -m cone.demo.echo_agent

A real agent would call its model here; this one answers each message so that the
turn format is easy to see: the turn arrives as JSON on stdin (docs/bridge.md),
whatever it prints on stdout is the reply (nothing printed: no reply), and a non-zero
exit makes the bridge retry the turn. It answers in kind too: a file gets a 👍
reaction and a receipt file back, a reaction gets a thank-you, both through the JSON
reply object (`{"replies": [...]}`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any


def _said(m: dict[str, Any]) -> str:
    if "reaction" in m:
        return f"(reacted {m['reaction']['emoji']})"
    if "attachment" in m:
        return f"(sent {m['attachment']['filename']})"
    return str(m.get("text") or json.dumps(m.get("data")))


def _text(turn: dict[str, Any]) -> str:
    said = [_said(m) for m in turn["messages"]]
    lines = [f"You said: {text}" for text in said]
    if turn["context"]:
        lines.append(f"(I also read {len(turn['context'])} earlier messages for context.)")
    if any("?" in text for text in said):
        lines.append("Good question. A real agent would think about it here.")
    return "\n".join(lines)


def _receipt(m: dict[str, Any]) -> list[dict[str, Any]]:
    """A 👍 on a file, and a receipt for it as a file back."""
    a = m["attachment"]
    data = Path(a["path"]).read_bytes() if "path" in a else b""
    receipt = (
        f"received {a['filename']} ({a['mimeType']}, {len(data)} bytes)\n"
        f"sha256 {hashlib.sha256(data).hexdigest()}\n"
    ).encode()
    return [
        {"reaction": {"messageId": m["messageId"], "emoji": "👍"}},
        {
            "attachment": {
                "filename": "receipt.txt",
                "mimeType": "text/plain",
                "data": base64.b64encode(receipt).decode(),
            }
        },
    ]


def answer(turn: dict[str, Any]) -> str:
    """The reply to one turn: plain text, or a JSON reply object for files and reactions."""
    replies: list[dict[str, Any]] = []
    for m in turn["messages"]:
        if "attachment" in m:
            replies += _receipt(m)
        elif "reaction" in m and m["reaction"]["action"] == "added":
            replies.append({"text": f"Thanks for the {m['reaction']['emoji']}."})
    if not replies:
        return _text(turn)
    return json.dumps({"replies": replies}, ensure_ascii=False)


def main() -> int:
    """Read the turn from stdin, print the reply."""
    turn = json.load(sys.stdin)
    print(answer(turn))
    return 0


if __name__ == "__main__":
    sys.exit(main())
