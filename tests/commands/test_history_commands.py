"""The operator's commands for conversations, history, contacts and groups, run as a
user runs them against a devnet."""

from __future__ import annotations

from pathlib import Path

import pytest

from conepb.v1 import cone_pb2 as pb
from support.cli import cone_cli
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import receive_n


@pytest.mark.slow
async def test_an_operator_reads_history_manages_a_group_and_unblocks_from_the_shell(
    home: Path, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    async with DaemonProcess(home, devnet) as daemon:
        await _session(daemon, alice, devnet, tmp_path)


async def _session(daemon: DaemonProcess, alice: Peer, devnet: str, tmp_path: Path) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    state = ["--home", str(daemon.home), "--api-url", devnet]
    sent = await cone_cli(["send", alice.address, "hello alice", "--key", "k1", *state])
    assert sent.code == 0, sent.err
    assert (await cone_cli(["connect", bob.address, "--name", "bob", *state])).code == 0
    contacts = await cone_cli(["contacts", *state, "--json"])
    assert contacts.code == 0, contacts.err
    assert {c.get("name") for c in contacts.json()["contacts"]} >= {"bob"}
    readable = await cone_cli(["contacts", *state], tty=True)
    assert "bob" in readable.out

    dms = await cone_cli(["conversations", "--type", "dm", *state, "--json"])
    dm = next(c for c in dms.json()["conversations"] if c["peerInboxId"] == alice.inbox_id)
    await alice.sync()
    await alice.send(alice.conversation(bytes.fromhex(dm["conversationId"])), "hi cone")
    await receive_n(daemon.client, 1)
    history = await cone_cli(["messages", dm["conversationId"], *state, "--json"])
    assert history.code == 0, history.err
    texts = [(m.get("own", False), m.get("text")) for m in history.json()["messages"]]
    assert texts == [(False, "hi cone"), (True, "hello alice")]  # newest first
    lines = (await cone_cli(["messages", dm["conversationId"], *state], tty=True)).out
    assert "me: hello alice" in lines and "hi cone" in lines

    made = await cone_cli(
        ["group", "create", alice.address, "bob", "--name", "crew", "--key", "g1", *state, "--json"]
    )
    assert made.code == 0, made.err
    gid = made.json()["group"]["conversationId"]
    again = await cone_cli(
        ["group", "create", alice.address, "bob", "--key", "g1", *state, "--json"]
    )
    assert again.json()["deduplicated"] and again.json()["group"]["conversationId"] == gid
    members = await cone_cli(["group", "members", gid, *state, "--json"])
    assert {m["inboxId"] for m in members.json()["members"]} >= {alice.inbox_id, bob.inbox_id}
    removed = await cone_cli(["group", "remove", gid, "bob", *state, "--json"])
    assert removed.code == 0, removed.err
    assert bob.inbox_id not in {m["inboxId"] for m in removed.json()["members"]}
    renamed = await cone_cli(["group", "update", gid, "--name", "crew 2", *state], tty=True)
    assert renamed.code == 0 and "crew 2" in renamed.out
    listed = await cone_cli(["conversations", "--type", "group", *state, "--json"])
    assert [c["conversationId"] for c in listed.json()["conversations"]] == [gid]

    await daemon.client.call("Block", pb.BlockRequest(conversation_id=dm["conversationId"]))
    unblocked = await cone_cli(["unblock", dm["conversationId"], *state], tty=True)
    assert unblocked.code == 0 and "request again" in unblocked.out
    held = await cone_cli(["requests", *state, "--json"])
    assert dm["conversationId"] in {r["conversationId"] for r in held.json()["requests"]}
    # The creator is the group's super admin, whom XMTP does not let leave: a clear
    # refusal (exit 4), not a network error.
    left = await cone_cli(["group", "leave", gid, *state])
    assert left.code == 4 and "super admin cannot leave" in left.err, left.err
    bad = await cone_cli(["group", "add", "z z", "bob", *state])
    assert bad.code == 2 and "ID" in bad.err
