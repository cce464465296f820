"""`cone send` sends what the protocol can: a reaction (--react) and a file (--file),
besides text; one kind at a time, and a file too big is refused before it is read."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from support.cli import CliResult, cone_cli
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import receive_n, until


def _error_line(result: CliResult, command: str) -> str:
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"cone {command}: "), result.err
    return lines[0]


async def test_send_reacts_and_sends_a_file_that_the_peer_receives(
    home: Path, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    state = ["--home", str(home), "--api-url", devnet]
    photo = tmp_path / "photo.png"
    photo.write_bytes(os.urandom(2048))
    async with DaemonProcess(home, devnet) as daemon:
        made = await cone_cli(["connect", alice.address, "--name", "alice", *state, "--json"])
        cid = made.json()["contact"]["conversationId"]
        await alice.sync()
        theirs = (await alice.send(alice.conversation(bytes.fromhex(cid)), "look")).hex()
        await receive_n(daemon.client, 1)

        reacted = await cone_cli(["send", "alice", "--react", theirs, "👍", *state, "--json"])
        assert reacted.code == 0, reacted.err
        filed = await cone_cli(["send", "alice", "--file", str(photo), *state, "--json"])
        assert filed.code == 0, filed.err

        history = await cone_cli(["messages", "alice", *state, "--json"])
        own = {m["messageId"]: m for m in history.json()["messages"] if m.get("own")}
        reaction = own[reacted.json()["messageId"]]["reaction"]
        assert (reaction["messageId"], reaction["emoji"], reaction["action"]) == (
            theirs,
            "👍",
            "added",
        )
        attachment = own[filed.json()["messageId"]]["attachment"]
        assert (attachment["filename"], attachment["mimeType"]) == ("photo.png", "image/png")
        assert base64.b64decode(attachment["data"]) == photo.read_bytes()

        sent = {reacted.json()["messageId"], filed.json()["messageId"]}

        async def alice_has_both() -> bool:
            got = {m.id.hex() for m in await alice.received(bytes.fromhex(cid))}
            return sent <= got

        await until(alice_has_both)

        # one kind at a time; a file too big or missing is said before anything is sent
        both = await cone_cli(["send", "alice", "hi", "--file", str(photo), *state])
        assert both.code == 2 and "give one of TEXT" in _error_line(both, "send"), both
        none = await cone_cli(["send", "alice", *state])
        assert none.code == 2 and "give one of TEXT" in _error_line(none, "send"), none
        big = tmp_path / "big.bin"
        big.write_bytes(bytes(1_000_001))
        too_big = await cone_cli(["send", "alice", "--file", str(big), *state])
        assert too_big.code == 2, too_big
        assert "at most 1000000 bytes" in _error_line(too_big, "send")
        missing = await cone_cli(["send", "alice", "--file", str(tmp_path / "nope"), *state])
        assert missing.code == 2 and "No such file" in _error_line(missing, "send"), missing
