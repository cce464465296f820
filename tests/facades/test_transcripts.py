"""Golden JSON-RPC transcripts (tests/data/jsonrpc_*.jsonl): replayed against a live
`cone serve` on the devnet, and shown verbatim in docs/protocol.md.

A transcript is JSON lines, one step each: `send` (a message sent as one line),
`send_raw` (a line sent as it is), `expect` (the next answer, in arrival order),
`peer` (alice sends this text in the conversation `<conversationId>`) or `note`.
In `expect`, a string `<name>` matches any value and binds it; a bound name must match
again; "…" matches any value. In `send`, `<name>` inside strings is replaced by its bound value.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from support.peers import Peer

from ._serve import ServeProcess

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = sorted((ROOT / "tests" / "data").glob("jsonrpc_*.jsonl"))
PROTOCOL_DOC = ROOT / "docs" / "protocol.md"
_NAME = re.compile(r"<(\w+)>")
ELIDED = "…"  # matches any value, binds nothing


def load(path: Path) -> list[dict[str, Any]]:
    """The steps of a transcript."""
    steps = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for step in steps:
        assert len(step) == 1 and next(iter(step)) in {"send", "send_raw", "expect", "peer", "note"}
    return steps


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def render(steps: list[dict[str, Any]]) -> str:
    """A transcript as docs/protocol.md shows it: → sent, ← received, # notes."""
    out = []
    for step in steps:
        (kind, value), *_ = step.items()
        if kind == "send":
            out.append(f"→ {_compact(value)}")
        elif kind == "send_raw":
            out.append(f"→ {value}")
        elif kind == "expect":
            out.append(f"← {_compact(value)}")
        elif kind == "peer":
            out.append(f"# (alice sends {_compact(value)})")
        else:
            out.append(f"# {value}")
    return "\n".join(out)


def _substitute(value: Any, bound: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return _NAME.sub(lambda m: str(bound.get(m.group(1), m.group(0))), value)
    if isinstance(value, list):
        return [_substitute(v, bound) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, bound) for k, v in value.items()}
    return value


def _match(expected: Any, actual: Any, bound: dict[str, Any], where: str) -> None:
    if expected == ELIDED:
        return
    if isinstance(expected, str) and (name := _NAME.fullmatch(expected)):
        key = name.group(1)
        if key in bound:
            assert actual == bound[key], f"{where}: {key} was {bound[key]!r}, now {actual!r}"
        else:
            bound[key] = actual
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), (where, actual)
        for k, v in expected.items():
            _match(v, actual[k], bound, f"{where}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), (where, actual)
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _match(e, a, bound, f"{where}[{i}]")
    else:
        assert expected == actual, (where, expected, actual)


def test_there_are_transcripts_and_each_is_well_formed() -> None:
    assert {p.name for p in TRANSCRIPTS} >= {
        "jsonrpc_session.jsonl",
        "jsonrpc_errors.jsonl",
        "jsonrpc_cancel.jsonl",
    }
    for path in TRANSCRIPTS:
        assert any("expect" in step for step in load(path))


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
def test_the_protocol_doc_shows_the_transcript_verbatim(path: Path) -> None:
    assert render(load(path)) in PROTOCOL_DOC.read_text(), (
        f"docs/protocol.md must include the rendering of {path.name}:\n{render(load(path))}"
    )


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
async def test_the_transcript_replays_against_a_live_serve(
    path: Path, home: Path, devnet: str, alice: Peer
) -> None:
    bound: dict[str, Any] = {"aliceAddress": alice.address, "aliceInboxId": alice.inbox_id}
    async with ServeProcess(home, devnet) as serve:
        # A transcript shows a settled session: until the start's first sync is done,
        # answers from the store carry `stale` (docs/guarantees.md).
        await serve.settled()
        for step in load(path):
            (kind, value), *_ = step.items()
            if kind == "send":
                serve.send(_substitute(value, bound))
            elif kind == "send_raw":
                serve.send_raw(value.encode() + b"\n")
            elif kind == "expect":
                index = bound.setdefault("_taken", 0)
                answer = (await serve.next_answers(index + 1))[index]
                bound["_taken"] = index + 1
                _match(value, answer, bound, f"{path.name}:{index}")
            elif kind == "peer":
                await alice.sync()
                dm = alice.conversation(bytes.fromhex(bound["conversationId"]))
                await alice.send(dm, value)
        assert await serve.close() == 0
        assert len(serve.answers) == bound.get("_taken", 0), serve.answers[bound.get("_taken", 0) :]
