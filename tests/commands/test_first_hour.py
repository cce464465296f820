"""The mistakes of a first hour with cone, made on purpose: a typo in `--home`, an
`init` while the node is down, a short address, bare `cone`, Ctrl-C in the demo.
Each gets one true line and the exit code docs/cli.md gives."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cone.devnet import Devnet
from support.cli import CliResult, cone_cli
from support.daemons import DaemonProcess
from support.ports import fresh_port

NO_IDENTITY = 7
CID = "0123456789abcdef0123456789abcdef"
ADDRESS = "0x" + "ab" * 20

# Every one-shot command that reaches the identity, as a user would type it.
ONE_SHOT = [
    ["status"],
    ["send", ADDRESS, "hi"],
    ["send", "bob", "hi"],
    ["reply", CID, "hi"],
    ["connect", ADDRESS],
    ["requests"],
    ["accept", CID],
    ["block", CID],
    ["unblock", CID],
    ["conversations"],
    ["messages", CID],
    ["contacts"],
    ["group", "create", ADDRESS],
    ["group", "members", CID],
    ["group", "add", CID, ADDRESS],
    ["group", "leave", CID],
    ["sync"],
    ["tail"],
    ["backup", "out.cone"],
]


def _error_line(result: CliResult, command: str) -> str:
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"cone {command}: "), result.err
    return lines[0]


async def test_a_typo_in_home_creates_nothing_and_says_to_run_init(tmp_path: Path) -> None:
    typo = tmp_path / "agnet"
    # A node that is not there: had any command tried to register, it would fail
    # differently (exit 5), not with the missing identity.
    state = ["--home", str(typo), "--api-url", f"http://127.0.0.1:{fresh_port()}"]
    env = {"CONE_BACKUP_PASSPHRASE": "correct horse"}
    results = await asyncio.gather(*(cone_cli([*argv, *state], env=env) for argv in ONE_SHOT))
    for argv, result in zip(ONE_SHOT, results, strict=True):
        assert result.code == NO_IDENTITY, (argv, result)
        line = _error_line(result, argv[0])
        assert f"cone init --home {typo}" in line, line
        assert not typo.exists(), argv
    as_json = await cone_cli(["requests", *state, "--json"])
    assert as_json.code == NO_IDENTITY
    assert as_json.json()["error"]["data"]["reason"] == "no_identity"
    assert as_json.json()["error"]["code"] == -32007
    assert not typo.exists()


async def test_a_file_given_as_home_is_said_in_words(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("not a state directory")
    hosts = [["daemon"], ["serve"], ["mcp"], ["init"]]
    for home in (file, file / "agent"):
        state = ["--home", str(home), "--api-url", f"http://127.0.0.1:{fresh_port()}"]
        argvs = [*ONE_SHOT, *hosts]
        results = await asyncio.gather(*(cone_cli([*argv, *state], stdin=b"") for argv in argvs))
        for argv, result in zip(argvs, results, strict=True):
            assert result.code == 6, (argv, result)
            line = _error_line(result, argv[0])
            assert f"{file} is a file" in line and "Errno" not in line, line
    assert file.read_text() == "not a state directory"


async def test_an_init_that_cannot_reach_the_node_leaves_no_identity(home: Path) -> None:
    port = fresh_port()
    state = ["--home", str(home), "--api-url", f"http://127.0.0.1:{port}"]
    down = await cone_cli(["init", *state])
    assert down.code == 5, down
    assert "cannot reach the XMTP node" in _error_line(down, "init")
    # Nothing registered counts as no identity: commands say to run init, not "no requests".
    requests = await cone_cli(["requests", *state])
    assert requests.code == NO_IDENTITY, requests
    assert f"cone init --home {home}" in _error_line(requests, "requests")
    async with Devnet(port=port):
        up = await cone_cli(["init", *state, "--json"])
        assert up.code == 0, up.err
        assert up.json()["created"] is True
        again = await cone_cli(["init", *state, "--json"])
        assert again.json()["created"] is False
        assert again.json()["inboxId"] == up.json()["inboxId"]
        listed = await cone_cli(["requests", *state])
        assert listed.code == 0 and listed.out.strip() == "no requests", listed


async def test_a_long_running_host_says_when_it_creates_the_identity(
    home: Path, devnet: str
) -> None:
    async with DaemonProcess(home, devnet) as daemon:
        me = await daemon.client.identity()
        said = daemon.stderr().splitlines()
    created = [line for line in said if "created a new identity" in line]
    assert created == [
        f"cone daemon: created a new identity {me.address} in {home} (registered on local)"
    ]
    async with DaemonProcess(home, devnet) as again:
        await again.client.identity()
        assert "created a new identity" not in again.stderr()
    # `cone serve` (as protocol.md uses it) creates one on a new directory, and says so.
    fresh = home / "served"
    ask = b'{"jsonrpc": "2.0", "id": 1, "method": "identity"}\n'
    served = await cone_cli(["serve", "--home", str(fresh), "--api-url", devnet], stdin=ask)
    assert served.code == 0, served.err
    address = json.loads(served.out)["result"]["address"]
    said = [line for line in served.err.splitlines() if "created a new identity" in line]
    assert said == [
        f"cone serve: created a new identity {address} in {fresh} (registered on local)"
    ]


async def test_wrong_input_exits_2_with_words_not_patterns() -> None:
    short = await cone_cli(["send", "0x123", "hi"])
    assert short.code == 2, short
    line = _error_line(short, "send")
    assert "0x and 40 hex digits" in line and "cone send --help" in line
    member = await cone_cli(["group", "create", "0xabc"])
    assert member.code == 2 and "not an address" in _error_line(member, "group")
    bad_id = await cone_cli(["reply", "not hex!", "x"])
    assert bad_id.code == 2
    line = _error_line(bad_id, "reply")
    assert "conversation id" in line and "^" not in line and "$" not in line, line
    bad_ref = await cone_cli(["messages", "0123", "--before", "nothex"])
    assert bad_ref.code == 2
    line = _error_line(bad_ref, "messages")
    assert "hex id" in line and "^" not in line and "$" not in line, line


async def test_bare_cone_prints_the_help_and_help_texts_say_what_they_do() -> None:
    bare = await cone_cli([])
    assert bare.code == 0, bare
    assert bare.out.startswith("usage: cone") and "sync" in bare.out and bare.err == ""
    tail = await cone_cli(["tail", "--help"])
    assert "one JSON document per line" in " ".join(tail.out.split())
    status = await cone_cli(["status", "--help"])
    text = " ".join(status.out.split())
    assert "the state directory's db.key" in text and "HOME/db.key" not in text


def test_ctrl_c_during_the_demo_prints_one_line_and_no_traceback() -> None:
    demo = subprocess.Popen(
        [sys.executable, "-m", "cone", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches
    )
    try:
        assert demo.stdout is not None
        first = demo.stdout.readline()
        assert first.startswith("cone demo: a local devnet"), first
        os.killpg(demo.pid, signal.SIGINT)
        out, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 130
    assert "Traceback" not in err and "Traceback" not in out
    assert err.strip().splitlines() == ["cone demo: interrupted; everything it started is stopped"]


def test_every_pattern_rule_is_said_in_words() -> None:
    """No regular expression reaches a person: every field with a pattern rule carries
    `(cone.v1.expect)`, and a refusal uses it."""
    from buf.validate import validate_pb2
    from cone.errors import InvalidArgument
    from cone.rules import check
    from conepb.v1 import cone_pb2, options_pb2

    def patterned(desc, seen):  # type: ignore[no-untyped-def]
        if desc.full_name in seen:
            return
        seen.add(desc.full_name)
        for fd in desc.fields:
            rules = fd.GetOptions().Extensions[validate_pb2.field]
            if rules.string.pattern or rules.repeated.items.string.pattern:
                yield desc.full_name, fd
            if fd.message_type is not None:
                yield from patterned(fd.message_type, seen)

    seen: set[str] = set()
    found = [
        (name, fd.name)
        for desc in cone_pb2.DESCRIPTOR.message_types_by_name.values()
        for name, fd in patterned(desc, seen)
    ]
    assert found, "the proto has pattern rules"
    bare = [
        f"{name}.{field}"
        for name, field in found
        if not cone_pb2.DESCRIPTOR.message_types_by_name[name.split(".")[-1]]
        .fields_by_name[field]
        .GetOptions()
        .HasExtension(options_pb2.expect)
    ]
    assert not bare, f"pattern rules without words: {bare}"
    with pytest.raises(InvalidArgument) as refused:
        check(cone_pb2.AcceptRequest(conversation_id="ab\n"))
    assert "^" not in refused.value.message and "hex" in refused.value.message
