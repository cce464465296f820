"""The operator's commands, run as a user runs them against a devnet: `cone init`,
`status`, `send`, `reply`, `connect`, `requests`, `accept`, `block`, `--version`."""

from __future__ import annotations

import re
from pathlib import Path

from cone.devnet import Devnet
from support.cli import CliResult, cone_cli
from support.daemons import DaemonProcess, short_home
from support.waiting import until

HEX = re.compile(r"^[0-9a-f]+$")


def _one_error_line(result: CliResult, command: str) -> str:
    """The error a failed command printed: exactly one line, `cone COMMAND: ...`."""
    lines = [line for line in result.err.splitlines() if line.startswith("cone ")]
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"cone {command}: "), result.err
    assert "failed to connect to all addresses" not in result.err
    return lines[0]


async def test_version_names_cone_the_protocol_and_libxmtp() -> None:
    text = await cone_cli(["--version"], tty=True)
    assert text.code == 0
    assert re.match(r"cone \S+ \(protocol 1; libxmtp 1\.10\.0, commit \w+", text.out)
    doc = (await cone_cli(["--version", "--json"])).json()
    assert doc["protocol"] == 1 and doc["libxmtp"] == "1.10.0" and doc["cone"]


async def test_wrong_usage_prints_the_subcommands_usage() -> None:
    bad_flag = await cone_cli(["status", "--bogus"])
    assert bad_flag.code == 2
    assert "usage: cone status" in bad_flag.err and "--bogus" in bad_flag.err
    missing = await cone_cli(["reply", "0123abcd"])
    assert missing.code == 2
    assert "usage: cone reply" in missing.err and "TEXT" in missing.err
    # send's TEXT may give way to --react or --file: without any, it says which it takes
    nothing = await cone_cli(["send", "0x" + "ab" * 20])
    assert nothing.code == 2
    assert "give one of TEXT, --react MESSAGE EMOJI and --file PATH" in nothing.err


async def test_init_creates_then_shows_the_identity_and_says_what_to_do_next(
    devnet: str, home: Path
) -> None:
    state = ["--home", str(home), "--api-url", devnet]
    first = await cone_cli(["init", *state], tty=True)
    assert first.code == 0, first.err
    assert "created a new identity" in first.out
    assert f"network       local over V3 (node {devnet})" in first.out
    assert f"cone daemon --home {home} --api-url {devnet}" in first.out
    assert str(home / "db.key") in first.out
    again = await cone_cli(["init", *state, "--json"])
    assert again.code == 0, again.err
    doc = again.json()
    assert doc["created"] is False and doc["protocol"] == 1 and doc["network"] == "local"
    assert doc["address"].startswith("0x") and HEX.match(doc["inboxId"])
    assert doc["home"] == str(home) and doc["keySource"] == str(home / "db.key")
    assert doc["address"] in first.out and doc["inboxId"] in first.out
    d14n = home / "d14n"
    on_d14n = await cone_cli(
        ["init", "--home", str(d14n), "--gateway-url", devnet, "--api-url", devnet]
    )
    assert on_d14n.code == 0, on_d14n.err
    assert f"network       local over D14N (gateway {devnet})" in on_d14n.out


async def test_status_without_a_running_identity_fails_with_what_to_do(
    home: Path, devnet: str
) -> None:
    state = ["--home", str(home), "--api-url", devnet]
    empty = await cone_cli(["status", *state], tty=True)
    assert empty.code == 7
    assert f"cone init --home {home}" in _one_error_line(empty, "status")
    assert (await cone_cli(["init", *state])).code == 0
    result = await cone_cli(["status", *state], tty=True)
    assert result.code == 5
    line = _one_error_line(result, "status")
    assert f"cone daemon --home {home}" in line
    as_json = await cone_cli(["status", *state, "--json"])
    assert as_json.code == 5
    assert as_json.json()["error"]["data"]["reason"] == "daemon_unavailable"


async def test_an_operator_messages_from_the_shell_and_status_tracks_the_network(
    devnet_node: Devnet, devnet: str
) -> None:
    h1, h2 = short_home(), short_home()
    async with (
        DaemonProcess(h1, devnet) as d1,
        DaemonProcess(h2, devnet) as d2,
    ):
        one, two = ["--home", str(h1)], ["--home", str(h2)]
        status = await cone_cli(["status", *one], tty=True)
        assert status.code == 0, status.err
        assert status.out.startswith("cone status: healthy")
        doc = (await cone_cli(["status", *one, "--json"])).json()
        me = await d1.client.identity()
        peer = await d2.client.identity()
        assert doc["identity"]["address"] == me.address
        streams = {s["name"]: s["connected"] for s in doc["streams"]}
        assert streams == dict.fromkeys(
            ["messages", "requests", "accepted", "conversations", "consent"], True
        )

        # send without a key: one is made and printed, to retry with
        sent = await cone_cli(["send", peer.address, "hello from the shell", *one], tty=True)
        assert sent.code == 0, sent.err
        assert sent.out.startswith("sent ")
        key = re.search(r"^key (\S+) \(reuse it", sent.out, re.M)
        assert key is not None, sent.out
        retry = await cone_cli(
            ["send", peer.address, "hello again", "--key", key.group(1), *one, "--json"]
        )
        assert retry.json()["deduplicated"] is True

        # the peer sees a request, accepts it, replies
        async def requested() -> list[dict[str, object]]:
            result = await cone_cli(["requests", *two, "--json"])
            assert result.code == 0, result.err
            held: list[dict[str, object]] = result.json()["requests"]
            return held

        (request,) = await until(requested)
        cid = str(request["conversationId"])
        assert request["peerAddress"] == me.address
        shown = await cone_cli(["requests", *two], tty=True)
        assert cid in shown.out and me.address in shown.out
        accepted = await cone_cli(["accept", cid, *two], tty=True)
        assert accepted.code == 0 and accepted.out.strip() == f"accepted {cid}"
        reply = await cone_cli(["reply", cid, "hi back", "--key", "r1", *two, "--json"])
        assert reply.code == 0, reply.err
        answer = reply.json()
        assert answer["published"] is True and answer["conversationId"] == cid
        assert HEX.match(answer["messageId"]) and answer["key"] == "r1"

        # connect by address, under a name, then send by that name
        named = await cone_cli(["connect", peer.address, "--name", "bob", *one], tty=True)
        assert named.code == 0, named.err
        assert "as bob" in named.out and cid in named.out
        by_name = await cone_cli(["send", "bob", "by name", *one, "--json"])
        assert by_name.json()["conversationId"] == cid

        # errors: one line, the reason and what to do, the exit code of the error table
        bad = await cone_cli(["reply", "not hex", "x", *two])
        assert bad.code == 2
        assert "CONVERSATION" in _one_error_line(bad, "reply")
        unknown = await cone_cli(["block", "0123456789abcdef0123456789abcdef", *two])
        assert unknown.code == 3
        _one_error_line(unknown, "block")
        nobody = await cone_cli(["connect", "0x" + "1" * 40, *one])
        assert nobody.code == 3 and "not on XMTP" in _one_error_line(nobody, "connect")

        # status is a health check: unhealthy once the network is gone
        await devnet_node.stop(grace=0)

        async def unhealthy() -> CliResult | None:
            result = await cone_cli(["status", *one, "--json"])
            return result if result.code == 1 else None

        down = await until(unhealthy)
        assert down.json()["identity"]["address"] == me.address
        text = await cone_cli(["status", *one], tty=True)
        assert text.code == 1 and text.out.startswith("cone status: UNHEALTHY")

    # the daemon has gone: the socket is unreachable, and the error says what to do
    gone = await cone_cli(["status", *one], tty=True)
    assert gone.code == 5
    assert "cone daemon --home" in _one_error_line(gone, "status")
