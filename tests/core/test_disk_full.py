"""A full disk under the state directory: the daemon keeps answering, then recovers.

The state directory lives on a small tmpfs that the test fills to the last byte.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from cone.errors import ConeError, StateError
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.mounts import fill, tmpfs
from support.peers import Peer
from support.waiting import receive_n

T = TypeVar("T")

#: Generous: a frozen daemon never answers; a working one answers in milliseconds.
ANSWER_S = 15.0


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 48 MiB tmpfs, unmounted afterwards."""
    with tmpfs("48m") as mount_point:
        yield mount_point


async def _answered(call: Awaitable[T]) -> T | ConeError:
    """The call's result or its ConeError, which must come within ANSWER_S."""
    try:
        async with asyncio.timeout(ANSWER_S):
            return await call
    except ConeError as exc:
        return exc


async def _backup_to(daemon: DaemonProcess, target: Path) -> int:
    size = 0
    with target.open("wb") as out:
        async for chunk in daemon.client.backup("a passphrase"):
            if not chunk.HasField("manifest"):
                size += out.write(chunk.data)
    return size


async def test_a_full_disk_keeps_reads_answered_fails_sends_clearly_and_recovers(
    small_disk: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    async with DaemonProcess(small_disk / "home", devnet) as daemon:
        contact = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
        await alice.sync()
        dm = alice.conversation(bytes.fromhex(contact.conversation_id))
        await alice.send(dm, "before")
        (before,) = await receive_n(daemon.client, 1)
        sent = await daemon.client.call(
            "Send", pb.SendRequest(to=alice.address, text="sent before", key="k-before")
        )
        assert sent.published

        filler = fill(small_disk)
        await alice.send(dm, "while full")

        ident = await _answered(daemon.client.identity())
        assert not isinstance(ident, ConeError) and ident.inbox_id
        status = await _answered(daemon.client.call("Status", pb.StatusRequest()))
        assert not isinstance(status, ConeError), status
        got = await _answered(daemon.client.receive(wait_ms=0))
        assert not isinstance(got, ConeError), got
        assert before.message_id in [m.message_id for m in got.messages]
        acked = await _answered(daemon.client.ack([before.message_id]))
        assert acked == 1 or (isinstance(acked, StateError) and acked.reason == "storage_full")
        refused = await _answered(
            daemon.client.call("Send", pb.SendRequest(to=alice.address, text="x", key="k-full"))
        )
        assert isinstance(refused, StateError) and refused.reason == "storage_full", refused
        assert "full" in refused.message
        backup = await _answered(_backup_to(daemon, tmp_path / "full.cone"))
        assert isinstance(backup, StateError) and backup.reason == "storage_full", backup
        assert (await _answered(daemon.client.identity())).inbox_id == ident.inbox_id  # type: ignore[union-attr]

        filler.unlink()

        again = await daemon.client.call(
            "Send", pb.SendRequest(to=alice.address, text="sent after", key="k-after")
        )
        assert again.published
        dedup = await daemon.client.call(
            "Send", pb.SendRequest(to=alice.address, text="other", key="k-before")
        )
        assert (dedup.message_id, dedup.deduplicated) == (sent.message_id, True)
        texts = [m.text for m in await receive_n(daemon.client, 1)]
        if acked != 1:
            assert texts[0] == "before"
        await daemon.client.ack([before.message_id])
        (during,) = await receive_n(daemon.client, 1)
        assert during.text == "while full"
        assert await _backup_to(daemon, tmp_path / "after.cone") > 0
        # The peer got each send key's message once, and nothing from the refused send.
        texts = await alice.texts(bytes(dm.id()))
        assert (texts.count("sent before"), texts.count("sent after"), texts.count("x")) == (
            1,
            1,
            0,
        )
