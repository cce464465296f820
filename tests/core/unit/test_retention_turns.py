"""The disappearing-settings refresh in a big store reads its conversations in turns
(cone/core/intake/window_turns.py): each within `rounds` periods, a setting found in a later
turn recorded as in the first. libxmtp stands in by a stub that records what each
period asks; the store is the real one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cone.core.intake.window_turns import WindowTurns
from cone.core.retention import Retention
from cone.store import Consent, Kind, Store, conversations, retention
from support.waiting import until

KEY = bytes(range(32))
IDS = [f"c{i:03d}" for i in range(40)]
SETTING = (1_000, 3_600 * 10**9)


class _Groups:
    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    async def disappearing(self, conversation_ids: list[str]) -> dict[str, tuple[int, int]]:
        self.asked.append(list(conversation_ids))
        return {cid: SETTING for cid in conversation_ids if cid == "c033"}


async def test_a_big_store_reads_its_settings_in_turns_and_records_what_a_turn_finds(
    tmp_path: Path,
) -> None:
    store = Store.open(tmp_path / "cone.db", KEY)
    for cid in IDS:
        store.write_now(conversations.ensure, cid, Kind.GROUP, "", Consent.ACCEPTED, 1)
    groups = _Groups()
    engine: Any = SimpleNamespace(groups=groups)

    async def ids() -> list[str]:
        return list(reversed(IDS))  # the order given does not matter

    keeper = Retention(store, engine, ids, refresh_interval_s=0.01)
    keeper._turns = WindowTurns(str, all_up_to=5, rounds=4)
    await keeper.start()
    keeper.watch_settings()
    try:
        await until(lambda: _at_least(groups.asked, 5))
    finally:
        await keeper.stop()
        store.close()

    first = groups.asked[:4]
    assert [len(turn) for turn in first] == [10, 10, 10, 10]  # a quarter a period
    assert sorted(cid for turn in first for cid in turn) == IDS  # each within 4
    assert groups.asked[4] == first[0]  # then around again
    store = Store.open(tmp_path / "cone.db", KEY)
    try:
        assert store.read_now(retention.disappearing) == {"c033": SETTING}
    finally:
        store.close()


async def _at_least(asked: list[list[str]], n: int) -> bool:
    return len(asked) >= n
