"""The `@alias` rule and turn forming, without a network."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cone.bridge._address import addresses, valid_alias
from cone.bridge._context import Context, Gathered
from cone.bridge._journal import LOG_MAX_BYTES, Journal, OpenTurn, _line
from cone.bridge._turns import plan
from cone.errors import StateError
from conepb.v1 import cone_pb2 as pb


@pytest.mark.parametrize(
    "text",
    ["@bot", "hey @bot", "@Bot, help", "(@BOT)", "ask @bot.", "@bot?", "line\n@bot go", "@bot's"],
)
def test_a_whole_word_at_alias_addresses_the_agent(text: str) -> None:
    assert addresses(text, "bot")


@pytest.mark.parametrize(
    "text",
    ["bot", "@bots", "@bot-2", "@bot_x", "x@bot", "mail@bot.com", "@@bot", "@ bot", "", None],
)
def test_other_text_does_not_address_the_agent(text: str | None) -> None:
    assert not addresses(text, "bot")


@pytest.mark.parametrize(
    ("text", "alias", "expected"),
    [
        ("@kiss", "kiss", True),
        ("@KISS!", "kiss", True),
        ("@\u212aiss", "kiss", False),  # Kelvin sign for K
        ("@ki\u017f\u017f", "kiss", False),  # long s
        ("@K\u0131ss", "kiss", False),  # dotless i
        ("@\uff4biss", "kiss", False),  # fullwidth k
        ("@kiss\u0301", "kiss", False),  # a combining acute accent on the last letter
        ("@kisse\u0301 and @kiss", "kiss", True),  # the second one counts
        ("caf\u00e9@kiss", "kiss", False),  # a letter of any script before the @
        ("@kiss\u00e9", "kiss", False),  # and after the alias
        ("\uff20kiss", "kiss", False),  # a fullwidth @ is not @
        ("try `@kiss` in code", "kiss", False),
        ("```\n@kiss inside a fence\n```", "kiss", False),
        ("~~~python\n@kiss\n~~~\nthen @kiss", "kiss", True),
        ("``a ` @kiss ``", "kiss", False),  # a span of two backticks holding one
        ("`unclosed @kiss", "kiss", True),  # no closing backtick: not code
        ("```\nunclosed fence @kiss", "kiss", False),  # a fence runs to the end
    ],
)
def test_the_alias_rule_on_lookalikes_and_code(text: str, alias: str, expected: bool) -> None:
    assert addresses(text, alias) is expected


def test_no_alias_addresses_nothing_and_aliases_are_checked() -> None:
    assert not addresses("@bot", None)
    assert addresses("hi @my.agent!", "my.agent") and not addresses("hi @myxagent", "my.agent")
    assert valid_alias("bot") and valid_alias("my-agent.2")
    assert not valid_alias("") and not valid_alias("@bot") and not valid_alias("a b")


def _msg(i: int, conv: str, text: str, group: bool = True) -> pb.Message:
    kind = pb.CONVERSATION_TYPE_GROUP if group else pb.CONVERSATION_TYPE_DM
    return pb.Message(
        message_id=f"{i:02x}" * 4, conversation_id=conv, conversation_type=kind, text=text,
        sequence=i,
    )  # fmt: skip


def test_a_group_turn_ends_at_the_last_addressing_message() -> None:
    batch = [
        _msg(1, "aa", "chat"),
        _msg(2, "aa", "@bot one"),
        _msg(3, "aa", "more chat"),
        _msg(4, "aa", "@bot two"),
        _msg(5, "aa", "after"),
        _msg(6, "bb", "other group"),
        _msg(7, "cc", "a dm", group=False),
    ]
    p = plan(batch, "bot", {})
    group, dm = p.turns
    assert [m.text for m in group.messages] == ["@bot one", "@bot two"]
    assert [m.text for m in group.inline_context] == ["chat", "more chat"]
    assert group.ack_ids == [m.message_id for m in batch[:4]]  # "after" stays pending
    assert group.turn_id == batch[3].message_id and group.reply_key == f"reply:{group.turn_id}"
    assert [m.text for m in dm.messages] == ["a dm"]
    assert [m.text for m in p.context] == ["other group"]


def test_a_journaled_turn_is_formed_again_from_the_same_messages() -> None:
    batch = [_msg(1, "dd", "first", group=False), _msg(2, "dd", "later", group=False)]
    journal = {"dd": OpenTurn("dd", batch[0].message_id, [batch[0].message_id], attempts=1)}
    (turn,) = plan(batch, None, journal).turns
    assert [m.text for m in turn.messages] == ["first"]
    assert turn.reply_key == f"reply:{batch[0].message_id}"
    stale = {"dd": OpenTurn("dd", "ff" * 4, ["ff" * 4], attempts=1)}
    p = plan(batch, None, stale)
    assert p.stale == ["dd"] and [m.text for m in p.turns[0].messages] == ["first", "later"]


def test_held_context_is_capped_and_merged_in_order() -> None:
    ctx = Context(caller=None, consumer="bridge.context", cap=2)  # type: ignore[arg-type]
    dropped = ctx.hold([_msg(1, "aa", "c1"), _msg(2, "aa", "c2"), _msg(3, "aa", "c3")])
    assert dropped == [_msg(1, "aa", "c1").message_id]
    assert ctx.hold([_msg(3, "aa", "c3")]) == []  # held once
    (turn,) = plan([_msg(4, "aa", "c4"), _msg(5, "aa", "@bot go")], "bot", {}).turns
    assert [m.text for m in ctx.for_turn(turn)] == ["c3", "c4"]


def test_context_recovered_after_the_turn_waits_for_the_next_turn() -> None:
    ctx = Context(caller=None, consumer="bridge.context", cap=10)  # type: ignore[arg-type]
    # after a restart, recovery holds everything pending on the context consumer
    ctx.hold([_msg(1, "aa", "early"), _msg(2, "aa", "@bot now"), _msg(3, "aa", "later")])
    (turn,) = plan([_msg(2, "aa", "@bot now"), _msg(3, "aa", "later")], "bot", {}).turns
    assert [m.text for m in ctx.for_turn(turn)] == ["early"]
    assert [m.text for m in ctx._before(turn)] == ["early", "@bot now"]


class _Acks:
    """A fake core that records Ack calls."""

    def __init__(self) -> None:
        self.acked: list[tuple[str, list[str]]] = []

    async def call(self, rpc: str, request: object, timeout: float | None = None) -> object:
        assert rpc == "Ack" and isinstance(request, pb.AckRequest)
        self.acked.append((request.consumer, list(request.message_ids)))
        return pb.AckResponse(acknowledged=len(request.message_ids))


async def test_a_turn_consumes_only_the_context_before_its_last_message() -> None:
    core = _Acks()
    ctx = Context(core, "bridge.context", cap=10)
    early, now_, later = _msg(1, "aa", "early"), _msg(2, "aa", "@bot now"), _msg(3, "aa", "later")
    ctx.hold([early, now_, later])
    (turn,) = plan([now_, later], "bot", {}).turns
    await ctx.consumed(turn)
    ((consumer, ids),) = core.acked
    assert consumer == "bridge.context"
    assert sorted(ids) == sorted([now_.message_id, early.message_id])
    assert [m.text for m in ctx.held["aa"]] == ["later"]


def test_one_bridge_per_consumer_and_open_turns_persist(tmp_path: Path) -> None:
    first = Journal(tmp_path, "bridge")
    first.acquire()
    with pytest.raises(StateError) as err:
        Journal(tmp_path, "bridge").acquire()
    assert err.value.reason == "locked"
    Journal(tmp_path, "other").acquire()  # another consumer is fine
    assert first.begin("aa", "t1", ["t0", "t1"]) == 1
    assert first.begin("aa", "t1", ["t0", "t1"]) == 2
    first.withdraw("aa")
    first.failed("aa", "exit 1")
    first.release()
    again = Journal(tmp_path, "bridge")
    again.acquire()
    turn = again.open_turns["aa"]
    assert (turn.turn_id, turn.message_ids, turn.attempts) == ("t1", ["t0", "t1"], 1)
    assert turn.last_error == "exit 1"
    assert oct((tmp_path / "bridge" / "bridge" / "turns.jsonl").stat().st_mode & 0o777) == "0o600"
    again.finish("aa")
    assert again.open_turns == {}


def test_running_pids_are_journaled_and_an_earlier_releases_pids_file_read_once(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path, "bridge")
    journal.acquire()
    journal.begin("aa", "t1", ["t1"])
    journal.running("t1", 4242)
    journal.release()
    again = Journal(tmp_path, "bridge")
    again.acquire()
    assert again.pids == {"t1": 4242}
    again.running("t1", None)
    assert again.pids == {}
    again.release()
    folder = tmp_path / "bridge" / "bridge"
    (folder / "pids.json").write_text('{"t9": 42}')  # an earlier release's
    third = Journal(tmp_path, "bridge")
    third.acquire()
    assert third.pids == {"t9": 42} and "aa" in third.open_turns
    assert not (folder / "pids.json").exists()
    third.release()
    (folder / "pids.json").write_text('{"t1": 42')  # torn by an OS crash: ignored
    fourth = Journal(tmp_path, "bridge")
    fourth.acquire()
    assert fourth.pids == {"t9": 42}


def test_a_journal_change_is_one_short_line_however_many_turns_are_open(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "bridge")
    journal.acquire()
    log = tmp_path / "bridge" / "bridge" / "turns.jsonl"
    for c in range(50):
        journal.begin(f"c{c:02d}", f"t{c}", [f"t{c}"])
    before = log.stat().st_size
    journal.begin("zz", "tz", ["tz"])
    journal.running("tz", 7)
    journal.finish("c00")
    assert log.stat().st_size - before < 300
    journal.release()
    again = Journal(tmp_path, "bridge")
    again.acquire()
    assert len(again.open_turns) == 50 and "c00" not in again.open_turns
    assert again.pids == {"tz": 7}


def test_context_zero_hands_over_no_context() -> None:
    ctx = Context(caller=None, consumer="bridge.context", cap=0)  # type: ignore[arg-type]
    assert ctx.hold([_msg(1, "aa", "c1")]) == [_msg(1, "aa", "c1").message_id]
    (turn,) = plan([_msg(2, "aa", "inline"), _msg(3, "aa", "@bot go")], "bot", {}).turns
    assert ctx.for_turn(turn) == []


def test_a_torn_last_journal_line_leaves_the_state_before_it(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "bridge")
    journal.acquire()
    journal.begin("aa", "t1", ["t1"])
    journal.begin("bb", "t2", ["t2"])
    journal.release()
    log = tmp_path / "bridge" / "bridge" / "turns.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3  # the start's rewrite, then one line per save
    # A crash in the middle of the second save: its line is cut short.
    log.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])

    again = Journal(tmp_path, "bridge")
    again.acquire()
    assert sorted(again.open_turns) == ["aa"]  # the state the first save made durable
    assert len(log.read_bytes().splitlines()) == 1  # rewritten: no append follows a torn tail
    again.begin("cc", "t3", ["t3"])
    again.release()
    third = Journal(tmp_path, "bridge")
    third.acquire()
    assert sorted(third.open_turns) == ["aa", "cc"]


def test_a_journal_line_failing_its_checksum_is_skipped(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "bridge")
    journal.acquire()
    journal.begin("aa", "t1", ["t1"])
    journal.begin("aa", "t1", ["t1"])
    journal.release()
    log = tmp_path / "bridge" / "bridge" / "turns.jsonl"
    # The last line complete in length but not in content (a block never written).
    log.write_bytes(log.read_bytes().replace(b'"attempts":2', b'"attempts":9'))

    again = Journal(tmp_path, "bridge")
    again.acquire()
    assert again.open_turns["aa"].attempts == 1


def test_the_journal_of_an_earlier_release_is_read_once_and_replaced(tmp_path: Path) -> None:
    folder = tmp_path / "bridge" / "bridge"
    folder.mkdir(parents=True)
    turn = {"conversation_id": "aa", "turn_id": "t1", "message_ids": ["t1"], "attempts": 2}
    (folder / "turns.json").write_text(json.dumps({"turns": {"aa": turn}}))

    journal = Journal(tmp_path, "bridge")
    journal.acquire()
    assert journal.open_turns["aa"].attempts == 2
    assert not (folder / "turns.json").exists() and (folder / "turns.jsonl").exists()
    assert journal.begin("aa", "t1", ["t1"]) == 3


def test_a_long_journal_is_rewritten_as_one_line(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "bridge")
    journal.acquire()
    log = tmp_path / "bridge" / "bridge" / "turns.jsonl"
    sizes = []
    for i in range(600):
        journal.begin("aa", f"t{i}", [f"t{i}"])
        journal.finish("aa")
        sizes.append(log.stat().st_size)
    assert max(sizes) <= LOG_MAX_BYTES + 200
    assert any(b < a for a, b in itertools.pairwise(sizes))  # rewritten on the way
    journal.begin("bb", "last", ["last"])
    journal.release()
    again = Journal(tmp_path, "bridge")
    again.acquire()
    assert sorted(again.open_turns) == ["bb"]


def test_a_log_of_whole_states_from_an_earlier_release_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "bridge" / "bridge"
    folder.mkdir(parents=True)
    turn = {"conversation_id": "aa", "turn_id": "t1", "message_ids": ["t1"], "attempts": 1}
    states = [{"turns": {"aa": turn}}, {"turns": {"aa": {**turn, "attempts": 2}}}]
    (folder / "turns.jsonl").write_bytes(b"".join(_line(s) for s in states))

    journal = Journal(tmp_path, "bridge")
    journal.acquire()
    assert journal.open_turns["aa"].attempts == 2


def test_a_copy_of_the_journal_stays_syncable_across_a_rewrite(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "bridge")
    journal.acquire()
    journal.begin("aa", "t1", ["t1"], sync=False)
    copy = journal.log_copy()
    assert copy is not None
    while journal._log_size <= LOG_MAX_BYTES:  # until the next save rewrites the file
        journal.running("t1", 1)
        journal.running("t1", None)
    journal.begin("bb", "t2", ["t2"])  # the rewrite closes the journal's own descriptor
    try:
        os.fsync(copy)  # the turn's fsync, from its thread, still has a file to sync
    finally:
        os.close(copy)
    journal.release()
    again = Journal(tmp_path, "bridge")
    again.acquire()
    assert sorted(again.open_turns) == ["aa", "bb"]


async def test_acknowledgements_queued_during_a_call_go_out_together_in_the_next() -> None:
    calls: list[list[str]] = []
    release = asyncio.Event()

    async def send(ids: list[str]) -> None:
        calls.append(ids)
        await release.wait()

    tasks: list[asyncio.Task[None]] = []

    def start(work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        tasks.append(asyncio.create_task(work))
        return tasks[-1]

    gathered = Gathered(send, start)
    gathered.add(["a"])
    await asyncio.sleep(0)
    for ids in (["b"], ["c", "d"], ["e"]):  # while the first call runs
        gathered.add(ids)
    release.set()
    await asyncio.gather(*tasks)
    assert calls == [["a"], ["b", "c", "d", "e"]] and len(tasks) == 1
    gathered.add(["f"])  # idle again: a new call at once
    await asyncio.gather(*tasks)
    assert calls[-1] == ["f"] and len(tasks) == 2


@settings(max_examples=60, deadline=None)
@given(tail=st.binary(max_size=300))
def test_whatever_follows_the_journals_last_intact_line_loses_nothing_before_it(
    tail: bytes,
) -> None:
    """A crash (or anything else) may leave any bytes after the last complete line:
    the state is that of the lines before them, and the next start writes it afresh."""
    with tempfile.TemporaryDirectory() as d:
        home = Path(d)
        journal = Journal(home, "bridge")
        journal.acquire()
        journal.begin("aa", "t1", ["t1"])
        journal.running("t1", 41)
        journal.begin("bb", "t2", ["t2"])
        journal.finish("aa")
        journal.release()
        log = home / "bridge" / "bridge" / "turns.jsonl"
        log.write_bytes(log.read_bytes() + tail)
        again = Journal(home, "bridge")
        again.acquire()
        assert sorted(again.open_turns) == ["bb"] and again.pids == {"t1": 41}
        again.release()
