"""A restored identity's sends arrive, whatever the original did after the backup.

Each test runs the operator's sequence with real processes: a daemon sends, is backed
up, sends more, stops; the backup is restored into a new home and a daemon started
there sends again; a raw libxmtp peer counts what arrived (docs/backup.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cone.errors import FailedPrecondition
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, run_cone, short_home
from support.node_peer import NodePeer
from support.peers import Peer, text_of
from support.waiting import until

PASS = "correct horse battery staple"


@pytest.fixture
def homes() -> Iterator[tuple[Path, Path, Path]]:
    """The original's home and two empty homes to restore into."""
    made = [short_home(), short_home(), short_home()]
    for restored in made[1:]:
        shutil.rmtree(restored)  # restore creates it
    yield made[0], made[1], made[2]
    for home in made:
        shutil.rmtree(home, ignore_errors=True)


def _env() -> dict[str, str]:
    return {**os.environ, "CONE_BACKUP_PASSPHRASE": PASS}


async def _send(d: DaemonProcess, conversation_id: str, text: str) -> str:
    answer = await d.client.call(
        "Send", pb.SendRequest(to=conversation_id, text=text, key=f"key-{text}")
    )
    assert answer.published, text
    return str(answer.message_id)


async def _arrived(peer: Peer, conversation_id: str, expected: list[str]) -> list[str]:
    """The texts the peer holds from others in the conversation, once all arrived (or
    what it holds when the wait ends)."""
    seen: list[str] = []

    async def all_there() -> bool:
        nonlocal seen
        held = await peer.received(bytes.fromhex(conversation_id))
        seen = [t for t in (text_of(m) for m in held) if t is not None]
        return all(text in seen for text in expected)

    with contextlib.suppress(TimeoutError):  # the caller's assertion shows what came
        await until(all_there, timeout=20)
    return seen


def _texts(seen: list[str], expected: list[str]) -> list[str]:
    """Which of `expected` the peer holds, each as often as it holds it."""
    return [text for text in expected for s in seen if text == s]


async def _original(d: DaemonProcess, alice: Peer, file: Path) -> tuple[str, str]:
    """The daemon in a DM and a group with alice, backed up into `file` after one
    message in each; returns the DM's and the group's ids."""
    dm = (await d.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    group = (
        await d.client.call(
            "CreateGroup", pb.CreateGroupRequest(members=[alice.address], key="group")
        )
    ).group
    for cid in (dm.conversation_id, group.conversation_id):
        await _send(d, cid, f"m1-{cid[:6]}")
    code, err = await run_cone(["backup", str(file), "--home", str(d.home)], _env())
    assert code == 0, err.decode()
    return dm.conversation_id, group.conversation_id


async def _restore(file: Path, home: Path) -> None:
    code, err = await run_cone(["restore", str(file), "--home", str(home)], _env())
    assert code == 0, err.decode()


async def test_sends_after_a_restore_arrive_though_the_original_sent_after_the_backup(
    homes: tuple[Path, Path, Path], devnet: str, alice: Peer, tmp_path: Path
) -> None:
    original, restored, _ = homes
    file = tmp_path / "a.cone"
    async with DaemonProcess(original, devnet) as d:
        dm, group = await _original(d, alice, file)
        for cid in (dm, group):  # what the restored copy's state does not know
            for n in (2, 3):
                await _send(d, cid, f"m{n}-{cid[:6]}")
    await _restore(file, restored)
    async with DaemonProcess(restored, devnet) as d2:
        for n in (1, 2, 3, 4):
            for cid in (dm, group):
                await _send(d2, cid, f"r{n}-{cid[:6]}")
            if n == 2:  # a crash of the restored daemon between its sends
                d2.kill9()
                await d2.restart()
    for cid in (dm, group):
        expected = [f"{m}-{cid[:6]}" for m in ("m1", "m2", "m3", "r1", "r2", "r3", "r4")]
        seen = await _arrived(alice, cid, expected)
        assert _texts(seen, expected) == expected, seen


async def test_a_conversation_the_original_moved_on_refuses_sends_with_its_reason(
    homes: tuple[Path, Path, Path], devnet: str, alice: Peer, tmp_path: Path
) -> None:
    original, restored, _ = homes
    file = tmp_path / "a.cone"
    async with DaemonProcess(original, devnet) as d:
        dm, group = await _original(d, alice, file)
        # A commit the restored copy cannot apply: the original renames the group.
        await d.client.call(
            "UpdateGroup", pb.UpdateGroupRequest(conversation_id=group, name="later")
        )
    await _restore(file, restored)
    async with DaemonProcess(restored, devnet) as d2:
        with pytest.raises(FailedPrecondition) as refused:
            await d2.client.call("Send", pb.SendRequest(to=group, text="lost?", key="g-after"))
        assert refused.value.reason == "restore_forked"
        await _send(d2, dm, "dm-after")  # the DM was not moved on: it still sends
        unsettled = (await d2.status()).outbox
        assert any(k.key == "g-after" and k.last_reason == "restore_forked" for k in unsettled)
        assert "restore_forked" in d2.stderr()
        warnings = (await d2.status()).warnings
        assert any("1 conversation(s) were moved on" in w for w in warnings), warnings
    seen = await _arrived(alice, dm, ["dm-after"])
    assert _texts(seen, ["dm-after"]) == ["dm-after"]
    group_texts = [text_of(m) for m in await alice.received(bytes.fromhex(group))]
    assert "lost?" not in group_texts


async def test_restoring_one_file_twice_never_loses_a_send(
    homes: tuple[Path, Path, Path], devnet: str, alice: Peer, tmp_path: Path
) -> None:
    original, first, second = homes
    file = tmp_path / "a.cone"
    async with DaemonProcess(original, devnet) as d:
        dm, _ = await _original(d, alice, file)
    await _restore(file, first)
    async with DaemonProcess(first, devnet) as d1:
        await _send(d1, dm, "from-first")
    # The second copy meets the first copy's key update: a commit of its own it
    # cannot apply. Its send is refused, never reported as sent.
    await _restore(file, second)
    async with DaemonProcess(second, devnet) as d2:
        with pytest.raises(FailedPrecondition) as refused:
            await d2.client.call("Send", pb.SendRequest(to=dm, text="from-second", key="k2"))
        assert refused.value.reason == "restore_forked"
    seen = await _arrived(alice, dm, ["from-first"])
    assert _texts(seen, ["from-first", "from-second"]) == ["from-first"]


async def test_a_key_pending_at_backup_reaches_the_peer_once(
    homes: tuple[Path, Path, Path], devnet: str, devnet_node: object, alice: Peer, tmp_path: Path
) -> None:
    original, restored, _ = homes
    file = tmp_path / "a.cone"
    faults = devnet_node.faults  # type: ignore[attr-defined]
    async with DaemonProcess(original, devnet) as d:
        dm = (await d.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
        await _send(d, dm.conversation_id, "before")
        faults.fail_group(bytes.fromhex(dm.conversation_id), 1000)
        pending = await d.client.call(
            "Send", pb.SendRequest(to=dm.conversation_id, text="pending", key="pending")
        )
        assert not pending.published
        code, err = await run_cone(["backup", str(file), "--home", str(original)], _env())
        assert code == 0, err.decode()
        faults.clear()
        # The original publishes the pending key after the backup.
        await until(lambda: _settled(d, "pending"), timeout=30)
    await _restore(file, restored)
    async with DaemonProcess(restored, devnet) as d2:
        await until(lambda: _settled(d2, "pending"), timeout=30)
        await _send(d2, dm.conversation_id, "after")
    expected = ["before", "pending", "after"]
    seen = await _arrived(alice, dm.conversation_id, expected)
    assert _texts(seen, expected) == expected, seen


async def _settled(d: DaemonProcess, key: str) -> bool:
    status = await d.status()
    return not any(k.key == key for k in status.outbox)


async def test_the_official_sdk_receives_every_send_of_a_restored_copy(
    homes: tuple[Path, Path, Path], devnet: str, tmp_path: Path
) -> None:
    original, restored, _ = homes
    file = tmp_path / "a.cone"
    async with NodePeer.start(devnet, tmp_path) as sdk:
        async with DaemonProcess(original, devnet) as d:
            dm = (await d.client.call("Connect", pb.ConnectRequest(to=sdk.address))).contact
            group = (
                await d.client.call(
                    "CreateGroup", pb.CreateGroupRequest(members=[sdk.address], key="group")
                )
            ).group
            cids = (dm.conversation_id, group.conversation_id)
            for cid in cids:
                await _send(d, cid, f"m1-{cid[:6]}")
            code, err = await run_cone(["backup", str(file), "--home", str(original)], _env())
            assert code == 0, err.decode()
            for cid in cids:
                await _send(d, cid, f"m2-{cid[:6]}")
        await _restore(file, restored)
        async with DaemonProcess(restored, devnet) as d2:
            for n in (1, 2, 3):
                for cid in cids:
                    await _send(d2, cid, f"r{n}-{cid[:6]}")
        for cid in cids:
            expected = [f"{m}-{cid[:6]}" for m in ("m1", "m2", "r1", "r2", "r3")]
            seen: list[str] = []

            async def all_there(cid: str = cid, expected: list[str] = expected) -> bool:
                nonlocal seen
                seen = [
                    str(m["content"])
                    for m in await sdk.messages(cid)
                    if m["senderInboxId"] != sdk.inbox_id and isinstance(m["content"], str)
                ]
                return all(text in seen for text in expected)

            with contextlib.suppress(TimeoutError):
                await until(all_there, timeout=20)
            assert _texts(seen, expected) == expected, seen


async def test_a_backup_in_a_busy_minute_restores_without_a_loss_or_a_double(
    homes: tuple[Path, Path, Path], devnet: str, alice: Peer, tmp_path: Path
) -> None:
    """Sends and receives run both ways; the backup is taken at a random moment among
    them; the original goes on; the restored copy sends. Every key the original or the
    copy sent reaches alice exactly once."""
    original, restored, _ = homes
    file = tmp_path / "a.cone"
    seconds = 60.0 if os.environ.get("CONE_SOAK") else 8.0
    sent: list[str] = []
    async with DaemonProcess(original, devnet) as d:
        dm = (await d.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
        cid = dm.conversation_id
        await alice.sync()
        conversation = alice.conversation(bytes.fromhex(cid))
        stop = asyncio.Event()

        async def cone_sends() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                text = f"busy-{n}"
                await d.client.call("Send", pb.SendRequest(to=cid, text=text, key=text))
                sent.append(text)

        async def alice_sends() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                await alice.send(conversation, f"in-{n}")

        traffic = [asyncio.create_task(cone_sends()), asyncio.create_task(alice_sends())]
        await asyncio.sleep(random.uniform(0.5, seconds - 1.0))  # the random moment
        code, err = await run_cone(["backup", str(file), "--home", str(original)], _env())
        assert code == 0, err.decode()
        backed_up = len(sent)

        async def went_on() -> bool:  # the original goes on after the backup
            return len(sent) >= backed_up + 3

        await until(went_on)
        stop.set()
        await asyncio.gather(*traffic)
        await until(lambda: _all_settled(d), timeout=30)
    await _restore(file, restored)
    async with DaemonProcess(restored, devnet) as d2:
        await until(lambda: _all_settled(d2), timeout=30)  # keys pending in the backup
        for n in (1, 2, 3):
            await _send(d2, cid, f"after-{n}")
            sent.append(f"after-{n}")
    seen = await _arrived(alice, cid, sent)
    assert sorted(_texts(seen, sent)) == sorted(sent), seen


async def _all_settled(d: DaemonProcess) -> bool:
    return not (await d.status()).outbox


async def test_a_conversation_made_after_the_restore_is_not_fenced(
    homes: tuple[Path, Path, Path], devnet: str, alice: Peer, tmp_path: Path
) -> None:
    """Only what the copy held at its restore is checked and rotated: a DM the copy
    makes afterwards gets its message and nothing else (no read receipt carrying a key
    update it does not need)."""
    original, restored, _ = homes
    file = tmp_path / "a.cone"
    async with DaemonProcess(original, devnet) as d:
        await _original(d, alice, file)
    await _restore(file, restored)
    carol = await Peer.create(devnet, tmp_path, "carol")
    async with DaemonProcess(restored, devnet) as d2:
        dm = (await d2.client.call("Connect", pb.ConnectRequest(to=carol.address))).contact
        await _send(d2, dm.conversation_id, "hello-new")
    seen = await _arrived(carol, dm.conversation_id, ["hello-new"])
    assert seen == ["hello-new"]
    held = await carol.received(bytes.fromhex(dm.conversation_id))
    assert [text_of(m) for m in held] == ["hello-new"], "nothing but the text arrived"
