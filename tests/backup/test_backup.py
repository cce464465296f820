"""Backup during live traffic and restore into a new home: the conversation goes on."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cone.store.backup import FORMAT_VERSION, _open_keyed
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess, run_cone, short_home
from support.peers import Peer
from support.waiting import receive_n, until

PASS = "correct horse battery staple"
MARKER = "BACKUP-PLAINTEXT-MARKER"


@pytest.fixture
def homes() -> Iterator[tuple[Path, Path]]:
    a, b = short_home(), short_home()
    shutil.rmtree(b)  # restore creates it
    yield a, b
    shutil.rmtree(a, ignore_errors=True)
    shutil.rmtree(b, ignore_errors=True)


def _env() -> dict[str, str]:
    return {**os.environ, "CONE_BACKUP_PASSPHRASE": PASS}


async def _backed_up(
    homes: tuple[Path, Path], devnet: str, alice: Peer, where: Path
) -> tuple[Path, dict[str, str]]:
    """A daemon with traffic, backed up while traffic continues; returns file and facts."""
    a, _ = homes
    file = where / "backup.cone"
    async with DaemonProcess(a, devnet) as d:
        contact = (await d.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
        sent = await d.client.call(
            "Send", pb.SendRequest(to=contact.conversation_id, text="before backup", key="k1")
        )
        await alice.sync()
        dm = alice.conversation(bytes.fromhex(contact.conversation_id))
        await alice.send(dm, f"{MARKER} unacked")
        (pending,) = await receive_n(d.client, 1)

        async def traffic() -> None:
            for i in range(10):
                await alice.send(dm, f"{MARKER} during {i}")

        live = asyncio.create_task(traffic())
        code, err = await run_cone(["backup", str(file), "--home", str(a)], _env())
        await live
        assert code == 0, err.decode()
        assert b"backed up inbox" in err
        ident = await d.client.identity()
    facts = {
        "inbox": ident.inbox_id,
        "installation": ident.installation_id,
        "conversation": contact.conversation_id,
        "sent": sent.message_id,
        "pending": pending.message_id,
    }
    return file, facts


async def test_restore_continues_the_same_installation_and_conversation(
    homes: tuple[Path, Path], devnet: str, alice: Peer, tmp_path: Path
) -> None:
    file, facts = await _backed_up(homes, devnet, alice, tmp_path)
    assert MARKER.encode() not in file.read_bytes()
    _, b = homes
    code, err = await run_cone(["restore", str(file), "--home", str(b)], _env())
    assert code == 0, err.decode()
    async with DaemonProcess(b, devnet) as d:
        ident = await d.client.identity()
        assert (ident.inbox_id, ident.installation_id) == (facts["inbox"], facts["installation"])
        got = await receive_n(d.client, 1)
        assert got[0].message_id == facts["pending"]  # still pending for its consumer
        again = await d.client.call(
            "Send", pb.SendRequest(to=facts["conversation"], text="regenerated", key="k1")
        )
        assert (again.message_id, again.deduplicated) == (facts["sent"], True)
        dm = alice.conversation(bytes.fromhex(facts["conversation"]))
        await alice.send(dm, "after restore")

        async def arrived() -> bool:
            batch = await d.client.receive(limit=1000, wait_ms=1000)
            return any(m.text == "after restore" for m in batch.messages)

        await until(arrived)
        reply = await d.client.call(
            "Reply",
            pb.ReplyRequest(conversation_id=facts["conversation"], text="restored reply", key="r"),
        )
        assert reply.published

        async def alice_got_it() -> bool:
            return "restored reply" in await alice.texts(bytes.fromhex(facts["conversation"]))

        await until(alice_got_it)


async def _refused(file: Path, target: Path, env: dict[str, str]) -> bytes:
    code, err = await run_cone(["restore", str(file), "--home", str(target)], env)
    assert code == 6, err.decode()
    assert not target.exists()  # noqa: ASYNC240  # a stat of a local path
    return err


async def test_a_damaged_or_foreign_backup_is_refused_and_writes_nothing(
    homes: tuple[Path, Path], devnet: str, alice: Peer, tmp_path: Path
) -> None:
    file, _ = await _backed_up(homes, devnet, alice, tmp_path)
    _, target = homes
    wrong = {**os.environ, "CONE_BACKUP_PASSPHRASE": "not the passphrase"}
    assert b"wrong passphrase" in await _refused(file, target, wrong)

    data = file.read_bytes()
    truncated = file.with_suffix(".truncated")
    truncated.write_bytes(data[: len(data) // 2])
    await _refused(truncated, target, _env())

    flipped = file.with_suffix(".flipped")
    middle = len(data) // 2
    flipped.write_bytes(data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :])
    await _refused(flipped, target, _env())

    newer = file.with_suffix(".newer")
    shutil.copy(file, newer)
    conn = _open_keyed(newer, PASS)
    import json

    (raw,) = conn.execute("SELECT value FROM backup_manifest").fetchone()
    manifest = json.loads(raw)
    manifest["format_version"] = FORMAT_VERSION + 1
    conn.execute("UPDATE backup_manifest SET value = ?", (json.dumps(manifest),))
    conn.commit()
    conn.close()
    assert b"newer than this cone" in await _refused(newer, target, _env())

    target.mkdir()
    (target / "something").write_text("x")
    code, err = await run_cone(["restore", str(file), "--home", str(target)], _env())
    assert code == 6 and b"not empty" in err
    assert sorted(p.name for p in target.iterdir()) == ["something"]
