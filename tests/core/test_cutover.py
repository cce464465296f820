"""A cone running on V3 crosses its node's cutover by itself: it moves libxmtp to D14N
through the devnet (its own gateway on `--network local`) on the same databases,
without a restart, and loses, repeats or holds back nothing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import Devnet
from cone.devnet.cutover import NO_CUTOVER_NS
from cone.engine import _client
from cone.engine._probe import cutover_ns
from cone.errors import ConeError
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.node_peer import NodePeer
from support.peers import OPEN, Peer
from support.ports import fresh_port
from support.waiting import until


@dataclass
class Movable:
    """A raw libxmtp peer that can be reopened on D14N over its own database."""

    peer: Peer
    db_path: str
    db_key: bytes

    @classmethod
    async def create(cls, url: str, directory: Path, name: str) -> Movable:
        key, db_key = _client.generate_wallet_key(), os.urandom(32)
        db_path = str(directory / f"{name}.db3")
        client = await _client.open_client(
            api_url=url, db_path=db_path, db_key=db_key, wallet_key=key
        )
        peer = Peer(name, client, key, _client.wallet_address(key), client.inbox_id())
        OPEN.append(peer)
        return cls(peer, db_path, db_key)

    async def move_to_d14n(self, url: str) -> None:
        """Reopen this peer's client on D14N (as cone does, but by hand)."""
        self.peer.client.release_db_connection()
        self.peer.client = await _client.open_client(
            api_url=url,
            gateway_url=url,
            db_path=self.db_path,
            db_key=self.db_key,
            wallet_key=self.peer.wallet_key,
            register=False,
        )


async def _pending(daemon: DaemonProcess) -> list[pb.Message]:
    batch = await daemon.client.receive(limit=1000, wait_ms=0)
    return list(batch.messages)


async def _cone_has(daemon: DaemonProcess, texts: set[str]) -> Counter[str]:
    """What cone's inbox holds, by text, once it holds every one of `texts`."""

    async def complete() -> Counter[str] | None:
        seen = Counter(m.text for m in await _pending(daemon))
        return seen if texts <= set(seen) else None

    found: Counter[str] = await until(complete)
    return found


async def _peer_has(peer: Peer, conversation_id: str, texts: set[str]) -> Counter[str]:
    """What `peer` holds from others in a conversation, once it holds every one."""

    async def complete() -> Counter[str] | None:
        got = await peer.received(bytes.fromhex(conversation_id))
        seen = Counter(ffi.decode_text(m.content) for m in got)
        return seen if texts <= set(seen) else None

    found: Counter[str] = await until(complete)
    return found


def _on_d14n(daemon: DaemonProcess) -> Callable[[], Awaitable[bool]]:
    """A condition for `until`: cone says it runs on D14N."""

    async def moved() -> bool:
        return (await daemon.client.identity()).backend == "d14n"

    return moved


async def _outbox_empty(daemon: DaemonProcess) -> bool:
    return not (await daemon.client.call("Status", pb.StatusRequest())).outbox


async def test_a_running_cone_crosses_the_cutover_by_itself(
    home: Path, devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    alice = await Movable.create(url, tmp_path, "alice")  # a raw V3 client
    async with DaemonProcess(home, url) as daemon:  # --network local, V3
        assert (await daemon.client.identity()).backend == "v3"
        dm = (
            await daemon.client.call("Connect", pb.ConnectRequest(to=alice.peer.address, name="a"))
        ).contact.conversation_id
        group = (
            await daemon.client.call(
                "CreateGroup", pb.CreateGroupRequest(members=[alice.peer.address], key="g")
            )
        ).group.conversation_id
        await alice.peer.sync()
        alice_dm = alice.peer.conversation(bytes.fromhex(dm))
        await alice.peer.send(alice_dm, "alice before")
        await daemon.client.call("Send", pb.SendRequest(to="a", text="cone before", key="b"))
        await _cone_has(daemon, {"alice before"})

        # Traffic both ways while the node cuts over.
        cone_keys: list[str] = []
        alice_sent: list[str] = []
        alice_tried: list[str] = []
        stop = asyncio.Event()

        async def cone_traffic() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                cone_keys.append(f"k{n}")
                with contextlib.suppress(ConeError):  # held by the cutover: it waits
                    await daemon.client.call(
                        "Send", pb.SendRequest(to="a", text=f"cone {n}", key=f"k{n}")
                    )

        async def alice_traffic() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                alice_tried.append(f"alice {n}")
                try:
                    await alice.peer.send(alice_dm, f"alice {n}")
                except ffi.FfiError:
                    return  # V3 refuses her from now on
                alice_sent.append(f"alice {n}")

        traffic = [asyncio.create_task(cone_traffic()), asyncio.create_task(alice_traffic())]
        await until(lambda: asyncio.sleep(0, len(cone_keys) >= 3 and len(alice_sent) >= 3))
        devnet_node.faults.set_v3_cutover(True)

        await until(_on_d14n(daemon))
        await until(lambda: asyncio.sleep(0, len(alice_tried) > len(alice_sent)))
        stop.set()
        await asyncio.gather(*traffic)

        # Every keyed send, held or not, is published once, without being asked again.
        await until(lambda: _outbox_empty(daemon))
        status = await daemon.client.call("Status", pb.StatusRequest())
        assert status.identity.backend == "d14n"

        # The node probe follows libxmtp to D14N: it asks the D14N reads now, so the
        # V3 ones refused (as by a node that serves D14N only) change nothing.
        devnet_node.faults.fail_next("GetIdentityUpdates", 1_000_000, grpc.StatusCode.UNIMPLEMENTED)

        async def reachable() -> bool:
            return (await daemon.status()).network_state == pb.NETWORK_STATE_REACHABLE

        await until(reachable)
        devnet_node.faults.fail_next("GetIdentityUpdates", 0)

        await alice.move_to_d14n(url)
        alice_dm = alice.peer.conversation(bytes.fromhex(dm))
        await alice.peer.send(alice_dm, "alice after")
        await daemon.client.call("Send", pb.SendRequest(to="a", text="cone after", key="after"))

        cone_texts = {"cone before", "cone after"} | {f"cone {k[1:]}" for k in cone_keys}
        at_alice = await _peer_has(alice.peer, dm, cone_texts)
        assert set(at_alice.values()) == {1}, at_alice
        assert set(at_alice) <= cone_texts
        at_cone = await _cone_has(daemon, {"alice before", "alice after", *alice_sent})
        assert set(at_cone.values()) == {1}, at_cone
        # What V3 refused her is published at most once, by her D14N client.
        assert set(at_cone) <= {"alice before", "alice after", *alice_tried}

        # A D14N peer added to the group after the cutover talks with cone and alice.
        bob = await Peer.create(url, tmp_path, "bob", d14n=True)
        await daemon.client.call(
            "AddMembers", pb.AddMembersRequest(conversation_id=group, members=[bob.address])
        )

        async def bob_in_group() -> Any:
            await bob.client.conversations().sync()
            with contextlib.suppress(ffi.FfiError):
                return bob.conversation(bytes.fromhex(group))
            return None

        await bob.send(await until(bob_in_group), "bob in the group")
        await daemon.client.call("Send", pb.SendRequest(to=group, text="cone to bob", key="gb"))
        assert (await _cone_has(daemon, {"bob in the group"}))["bob in the group"] == 1
        assert (await _peer_has(bob, group, {"cone to bob"})) == Counter({"cone to bob": 1})
        await _peer_has(alice.peer, group, {"bob in the group", "cone to bob"})

        # Acknowledge everything: a restart must deliver nothing again.
        pending = await _pending(daemon)
        await daemon.client.call("Ack", pb.AckRequest(message_ids=[m.message_id for m in pending]))

        # The move is recorded: a restart with the same flags starts on D14N at once.
        assert await daemon.stop() == 0
        await daemon.start()
        assert (await daemon.client.identity()).backend == "d14n"
        await alice.peer.send(alice_dm, "alice after the restart")
        await _cone_has(daemon, {"alice after the restart"})
        assert [m.text for m in await _pending(daemon)] == ["alice after the restart"]
        sent = await daemon.client.call(
            "Send", pb.SendRequest(to="a", text="cone after the restart", key="r")
        )
        assert sent.published


async def test_a_cone_started_after_the_cutover_moves_at_once_and_sends_what_waited(
    home: Path, devnet_node: Devnet, tmp_path: Path
) -> None:
    # Also what a restart in the middle of the switch meets: the move is recorded only
    # once it is done, so the next start is on V3 after the cutover.
    url = devnet_node.url
    alice = await Movable.create(url, tmp_path, "alice")
    async with DaemonProcess(home, url) as daemon:
        dm = (
            await daemon.client.call("Connect", pb.ConnectRequest(to=alice.peer.address, name="a"))
        ).contact.conversation_id
        await daemon.client.call("Send", pb.SendRequest(to="a", text="on V3", key="v3"))
        assert await daemon.stop() == 0
        devnet_node.faults.set_v3_cutover(True)
        await daemon.start()

        await until(_on_d14n(daemon))
        sent = await daemon.client.call("Send", pb.SendRequest(to="a", text="on D14N", key="d"))
        assert sent.published
        again = await daemon.client.call("Send", pb.SendRequest(to="a", text="again", key="v3"))
        assert again.deduplicated
        await alice.move_to_d14n(url)
        at_alice = await _peer_has(alice.peer, dm, {"on V3", "on D14N"})
        assert at_alice == Counter({"on V3": 1, "on D14N": 1})


@pytest.mark.parametrize("failpoint", ["d14n_opened", "d14n_swapped"])
async def test_a_kill9_in_the_middle_of_the_switch_still_ends_on_d14n_losing_nothing(
    home: Path, devnet_node: Devnet, tmp_path: Path, failpoint: str
) -> None:
    # Killed with the D14N client open but not yet swapped in, or swapped in but not
    # yet recorded: the next start is on V3 after the cutover and moves again.
    url = devnet_node.url
    alice = await Movable.create(url, tmp_path, "alice")
    marker_file = home.parent / f"{home.name}.failpoint"
    env = {"CONE_FAILPOINT": failpoint, "CONE_FAILPOINT_FILE": str(marker_file)}
    async with DaemonProcess(home, url, extra_env=env) as daemon:
        dm = (
            await daemon.client.call("Connect", pb.ConnectRequest(to=alice.peer.address, name="a"))
        ).contact.conversation_id
        await alice.peer.sync()
        alice_dm = alice.peer.conversation(bytes.fromhex(dm))
        for n in range(3):
            await alice.peer.send(alice_dm, f"alice before {n}")
            await daemon.client.call(
                "Send", pb.SendRequest(to="a", text=f"cone before {n}", key=f"b{n}")
            )
        await _cone_has(daemon, {f"alice before {n}" for n in range(3)})

        devnet_node.faults.set_v3_cutover(True)
        # Keyed sends the cutover holds (or, swapped already, publishes) while cone waits.
        for n in range(3):
            with contextlib.suppress(ConeError):
                await daemon.client.call(
                    "Send", pb.SendRequest(to="a", text=f"cone held {n}", key=f"h{n}")
                )
        await until(lambda: asyncio.sleep(0, marker_file.exists()))
        await alice.move_to_d14n(url)
        alice_dm = alice.peer.conversation(bytes.fromhex(dm))
        await alice.peer.send(alice_dm, "alice during")
        assert (await daemon.client.identity()).backend == "v3"  # not recorded yet
        daemon.kill9()

        for name in env:
            daemon.env.pop(name)
        await daemon.restart()
        await until(_on_d14n(daemon))
        await until(lambda: _outbox_empty(daemon))
        status = await daemon.client.call("Status", pb.StatusRequest())
        assert status.identity.backend == "d14n"
        again = await daemon.client.call("Send", pb.SendRequest(to="a", text="x", key="h0"))
        assert again.deduplicated
        await alice.peer.send(alice_dm, "alice after")
        await daemon.client.call("Send", pb.SendRequest(to="a", text="cone after", key="after"))

        cone_texts = {"cone after"} | {
            f"cone {w} {n}" for w in ("before", "held") for n in range(3)
        }
        at_alice = await _peer_has(alice.peer, dm, cone_texts)
        assert set(at_alice) == cone_texts and set(at_alice.values()) == {1}, at_alice
        alice_texts = {"alice during", "alice after"} | {f"alice before {n}" for n in range(3)}
        at_cone = await _cone_has(daemon, alice_texts)
        assert at_cone == Counter(alice_texts), at_cone
    marker_file.unlink()


async def _sdk_has(sdk: NodePeer, conversation_id: str, texts: set[str]) -> Counter[str]:
    """The texts others wrote that the SDK peer holds in a conversation, once it holds
    every one of `texts`."""

    async def complete() -> Counter[str] | None:
        got = await sdk.messages(conversation_id)
        seen = Counter(
            m["content"]
            for m in got
            if m["senderInboxId"] != sdk.inbox_id and m["contentType"] == "xmtp.org/text:1.0"
        )
        return seen if texts <= set(seen) else None

    found: Counter[str] = await until(complete)
    return found


async def test_a_node_sdk_peer_on_v3_continues_on_d14n_with_cone_after_the_cutover(
    home: Path, devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    async with DaemonProcess(home, url) as daemon, NodePeer.start(url, tmp_path) as sdk:
        assert (await daemon.client.identity()).backend == "v3"
        hello = await daemon.client.call(
            "Send", pb.SendRequest(to=sdk.inbox_id, text="cone before", key="before")
        )
        cid = hello.conversation_id
        await sdk.send(cid, "text", "sdk before")
        await _cone_has(daemon, {"sdk before"})

        devnet_node.faults.set_v3_cutover(True)

        await until(_on_d14n(daemon))
        # The SDK's V3 client is refused (node-sdk 5.5 cannot switch a running client):
        # the app starts a new client on its database through the gateway.
        with pytest.raises(AssertionError):
            await sdk.send(cid, "text", "sdk refused")
        await sdk.reopen_on_d14n(url)
        await sdk.send(cid, "text", "sdk after")
        sent = await daemon.client.call(
            "Send", pb.SendRequest(to=cid, text="cone after", key="after")
        )
        assert sent.published

        at_cone = await _cone_has(daemon, {"sdk before", "sdk after"})
        assert set(at_cone.values()) == {1}, at_cone
        # What V3 refused is published at most once, by the new client.
        assert set(at_cone) <= {"sdk before", "sdk after", "sdk refused"}
        at_sdk = await _sdk_has(sdk, cid, {"cone before", "cone after"})
        assert at_sdk == Counter({"cone before": 1, "cone after": 1})


async def test_the_engine_reads_the_cutover_time_the_node_reports(devnet_node: Devnet) -> None:
    url = devnet_node.url
    assert await cutover_ns(url) == NO_CUTOVER_NS  # none set: never
    at = time.time_ns() + 3600 * 10**9
    devnet_node.faults.set_cutover(at)
    assert await cutover_ns(url) == at
    assert await cutover_ns(f"http://127.0.0.1:{fresh_port()}") is None  # nobody answers
