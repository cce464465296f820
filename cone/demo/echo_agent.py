"""An example agent for `cone bridge`: reads one turn on stdin, prints the reply.

    cone bridge -- python -m cone.demo.echo_agent

A real agent would call its model here; this one answers each message so that the
turn format is easy to see: the turn arrives as JSON on stdin (docs/bridge.md),
whatever it prints on stdout is the reply (nothing printed: no reply), and a non-zero
exit makes the bridge retry the turn.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def answer(turn: dict[str, Any]) -> str:
    """The reply to one turn."""
    said = [m.get("text") or json.dumps(m.get("data")) for m in turn["messages"]]
    lines = [f"You said: {text}" for text in said]
    if turn["context"]:
        lines.append(f"(I also read {len(turn['context'])} earlier messages for context.)")
    if any("?" in text for text in said):
        lines.append("Good question. A real agent would think about it here.")
    return "\n".join(lines)


def main() -> int:
    """Read the turn from stdin, print the reply."""
    turn = json.load(sys.stdin)
    print(answer(turn))
    return 0


if __name__ == "__main__":
    sys.exit(main())
