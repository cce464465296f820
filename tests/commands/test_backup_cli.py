"""`cone backup` refuses to overwrite a file without --force and counts every message it
carries; `cone restore` ends with the exact command that starts the restored identity,
and that command works."""

from __future__ import annotations

import shlex
from pathlib import Path

from support.cli import cone_cli
from support.daemons import DaemonProcess, short_home
from support.peers import Peer
from support.waiting import receive_n

ENV = {"CONE_BACKUP_PASSPHRASE": "correct horse battery staple 42"}


async def test_backup_keeps_an_existing_file_and_restore_prints_the_start_command(
    devnet: str, tmp_path: Path, alice: Peer
) -> None:
    home, target = short_home(), short_home()
    file = tmp_path / "agent.cone"
    file.write_bytes(b"precious")
    async with DaemonProcess(home, devnet) as d:
        me = await d.client.identity()
        state = ["--home", str(home), "--api-url", devnet]
        sent = await cone_cli(["send", alice.address, "one sent", *state, "--json"])
        assert sent.code == 0, sent.err
        await alice.sync()
        await alice.send(alice.conversation(bytes.fromhex(sent.json()["conversationId"])), "one in")
        await receive_n(d.client, 1)
        refused = await cone_cli(["backup", str(file), "--home", str(home)], env=ENV)
        assert refused.code == 4
        assert refused.err.strip() == (
            f"cone backup: {file} exists: choose another FILE, or pass --force to replace it"
        )
        assert file.read_bytes() == b"precious"
        forced = await cone_cli(["backup", str(file), "--home", str(home), "--force"], env=ENV)
        assert forced.code == 0, forced.err
        assert "(2 message(s), received and sent;" in forced.err, forced.err
        assert file.read_bytes() != b"precious"
    target.rmdir()  # restore wants an empty or absent directory
    restored = await cone_cli(
        ["restore", str(file), "--home", str(target), "--api-url", devnet], env=ENV, tty=True
    )
    assert restored.code == 0, restored.err
    last = restored.err.strip().splitlines()[-1].strip()
    assert last == f"cone daemon --home {target} --api-url {devnet}"
    # that exact command starts the restored identity
    args = shlex.split(last)[1:]
    assert args[0] == "daemon"
    async with DaemonProcess(target, devnet) as again:
        assert again.args() == args
        assert (await again.client.identity()).inbox_id == me.inbox_id
