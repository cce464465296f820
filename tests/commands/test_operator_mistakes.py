"""An operator's mistakes against a running identity, made on purpose: sending to
oneself, reusing a send key, paging history with the ids it printed, a wrong
CONE_DB_KEY; and the commands that confirm what they did (`sync`, `group add`)."""

from __future__ import annotations

import re
from pathlib import Path

from support.cli import CliResult, cone_cli
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import receive_n

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _error_line(result: CliResult, command: str) -> str:
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"cone {command}: "), result.err
    return lines[0]


async def test_operator_mistakes_get_one_true_line(
    home: Path, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    state = ["--home", str(home), "--api-url", devnet]
    async with DaemonProcess(home, devnet) as daemon:
        me = await daemon.client.identity()

        # sending to oneself is refused (by address and by inbox id), nothing is made
        for own in (me.address, me.address.upper().replace("0X", "0x"), me.inbox_id):
            selfish = await cone_cli(["send", own, "hi me", *state])
            assert selfish.code == 2, selfish
            assert "this identity itself" in _error_line(selfish, "send")
        # a conversation id this inbox does not record is said to be one, not "sync first"
        nowhere = await cone_cli(["send", "0123456789abcdef" * 2, "hi", *state])
        assert nowhere.code == 3, nowhere
        line = _error_line(nowhere, "send")
        assert "records no conversation with this id" in line and "sync first" not in line
        connect_self = await cone_cli(["connect", me.address, *state])
        assert connect_self.code == 2, connect_self
        listed = await cone_cli(["conversations", *state, "--json"])
        assert listed.json()["conversations"] == []

        # `cone sync` exists (errors speak of "the next `sync`") and says what it did
        synced = await cone_cli(["sync", *state])
        assert synced.code == 0, synced.err
        assert synced.out.startswith("synced with the XMTP node")

        # a send key names one message: reusing it elsewhere says what to do
        first = await cone_cli(["send", alice.address, "one", "--key", "k1", *state])
        assert first.code == 0, first.err
        clash = await cone_cli(["send", bob.address, "two", "--key", "k1", *state])
        assert clash.code == 4, clash
        assert "use a new key for a new message" in _error_line(clash, "send")

        # history prints full ids and the exact flag for the next page, which works
        dms = (await cone_cli(["conversations", *state, "--json"])).json()["conversations"]
        cid = next(c["conversationId"] for c in dms if c["peerInboxId"] == alice.inbox_id)
        await alice.sync()
        chat = alice.conversation(bytes.fromhex(cid))
        for text in ("a", "b", "c"):
            await alice.send(chat, text)
        await receive_n(daemon.client, 3)
        page = await cone_cli(["messages", cid, "--limit", "2", *state], tty=True)
        assert page.code == 0, page.err
        more = re.search(r"^more: page on with (--before) ([0-9a-f]{64})$", page.out, re.M)
        assert more is not None, page.out
        shown = [line.split()[1] for line in page.out.splitlines()[:2]]
        assert shown[-1] == more.group(2)
        rest = await cone_cli(["messages", cid, more.group(1), more.group(2), *state, "--json"])
        assert rest.code == 0, rest.err
        texts = [m.get("text") for m in rest.json()["messages"]]
        assert texts == ["a", "one"]  # older than the two shown, newest first
        oldest = await cone_cli(["messages", cid, "--limit", "1", "--oldest-first", *state])
        assert re.search(r"^more: page on with --after [0-9a-f]{64}$", oldest.out, re.M)

        # `group add` says what it did
        made = await cone_cli(["group", "create", alice.address, "--key", "g", *state, "--json"])
        gid = made.json()["group"]["conversationId"]
        added = await cone_cli(["group", "add", gid, bob.address, *state])
        assert added.code == 0, added.err
        assert added.out.startswith(f"added 1 member(s) to group {gid}; its members now:")
        assert bob.inbox_id in added.out

        # docs/cli.md's status example has the lines the real status has, in order
        status = await cone_cli(["status", *state], tty=True)
        assert _labels(status.out) == _labels(_documented_status())
        assert f"(inbox {me.inbox_id})" in status.out

    # a wrong CONE_DB_KEY says that it overrides the directory's own db.key
    wrong = await cone_cli(["requests", *state], env={"CONE_DB_KEY": "ab" * 32})
    assert wrong.code == 6, wrong
    line = _error_line(wrong, "requests")
    assert "CONE_DB_KEY is set: it overrides" in line and str(home / "db.key") in line


def _labels(text: str) -> list[str]:
    """The first word of each line of a status report (its rows)."""
    return [line.split()[0] for line in text.splitlines() if line.strip()][1:]


def _documented_status() -> str:
    doc = DOCS.read_text()
    block = doc.split("$ cone status\n", 1)[1]
    return block.split("\n\n", 1)[0]
