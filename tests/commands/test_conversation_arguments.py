"""Every command that takes a conversation takes what `cone send` takes (a contact name,
an inbox id, an address, a conversation id); a request says how to accept it and shows
its group; `cone conversations` lists by last activity."""

from __future__ import annotations

from pathlib import Path

from xmtp_bindings import xmtpv3 as ffi

from cone.engine import _client
from conepb.v1 import cone_pb2 as pb
from support.cli import CliResult, cone_cli
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import receive_n, until


def _error_line(result: CliResult, command: str) -> str:
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"cone {command}: "), result.err
    return lines[0]


def _texts(result: CliResult) -> list[str]:
    assert result.code == 0, result.err
    return [m.get("text") for m in result.json()["messages"]]


async def test_a_conversation_is_named_as_send_names_it_and_a_request_says_how_to_accept(
    home: Path, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    carol = await Peer.create(devnet, tmp_path, "carol")
    state = ["--home", str(home), "--api-url", devnet]
    async with DaemonProcess(home, devnet) as daemon:
        me = await daemon.client.identity()
        connected = await cone_cli(["connect", alice.address, "--name", "alice", *state, "--json"])
        assert connected.code == 0, connected.err
        dm = connected.json()["contact"]["conversationId"]
        await alice.sync()
        await alice.send(alice.conversation(bytes.fromhex(dm)), "hi from alice")
        await receive_n(daemon.client, 1)

        # the contact name, the address (any case) and the inbox id all name alice's DM
        by_id = _texts(await cone_cli(["messages", dm, *state, "--json"]))
        assert by_id == ["hi from alice"]
        for name in ("alice", alice.address.upper().replace("0X", "0x"), alice.inbox_id):
            assert _texts(await cone_cli(["messages", name, *state, "--json"])) == by_id, name
        replied = await cone_cli(["reply", "alice", "hi back", "--key", "r1", *state, "--json"])
        assert replied.code == 0 and replied.json()["conversationId"] == dm, replied.err

        # a peer with no conversation, a name no contact has: said, nothing started
        nobody = await cone_cli(["messages", carol.address, *state])
        assert nobody.code == 3, nobody
        assert f"no conversation with {carol.address} is known" in _error_line(nobody, "messages")
        unnamed = await cone_cli(["messages", "dora", *state])
        assert unnamed.code == 3 and "no contact is saved as 'dora'" in unnamed.err, unnamed
        malformed = await cone_cli(["accept", "no such", *state])
        assert malformed.code == 2 and _error_line(malformed, "accept").startswith(
            "cone accept: ID 'no such' is not an address"
        )

        # bob's DM is a request: its history says how to let it in, by id or by bob
        await bob.send(await daemon.dm_from(bob), "hi from bob")
        team = await carol.client.conversations().create_group_by_identity(
            [_client.identifier(me.address), bob.identifier()], _named("team")
        )
        await carol.send(team, "hi team")

        async def both_requested() -> list[dict[str, object]] | None:
            await daemon.client.call("Sync", pb.SyncRequest())
            listed = await cone_cli(["requests", *state, "--json"])
            found = listed.json()["requests"]
            return found if len(found) == 2 else None

        requests = {r["conversationType"]: r for r in await until(both_requested)}
        bob_dm = str(requests["dm"]["conversationId"])
        for named in (bob_dm, bob.address):
            held = await cone_cli(["messages", named, *state])
            assert held.code == 4, held
            line = _error_line(held, "messages")
            assert line.endswith(f"accept it with `cone accept {bob_dm}`"), line
        shown = await cone_cli(["requests", *state], tty=True)
        group_line = next(
            x for x in shown.out.splitlines() if requests["group"]["conversationId"] in x
        )
        assert "group team (3 members)" in group_line, shown.out

        accepted = await cone_cli(["accept", bob.address, *state])
        assert accepted.code == 0 and accepted.out.strip() == f"accepted {bob_dm}", accepted
        assert _texts(await cone_cli(["messages", bob.inbox_id, *state, "--json"])) == [
            "hi from bob"
        ]


async def test_conversations_are_listed_by_last_activity(
    home: Path, alice: Peer, devnet: str, tmp_path: Path
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    state = ["--home", str(home), "--api-url", devnet]
    async with DaemonProcess(home, devnet) as daemon:
        ids = {}
        for peer in (alice, bob):
            made = await cone_cli(["connect", peer.address, *state, "--json"])
            assert made.code == 0, made.err
            ids[peer.name] = made.json()["contact"]["conversationId"]
        group = await cone_cli(["group", "create", alice.address, "--key", "g", *state, "--json"])
        ids["group"] = group.json()["group"]["conversationId"]
        # Newest first while nothing is said: the group, bob, alice.
        assert await _order(state) == [ids["group"], ids["bob"], ids["alice"]]
        # alice writes: her DM moves up; a send of our own moves bob's up above it.
        await alice.sync()
        await alice.send(alice.conversation(bytes.fromhex(ids["alice"])), "news")
        await receive_n(daemon.client, 1)
        assert await _order(state) == [ids["alice"], ids["group"], ids["bob"]]
        sent = await cone_cli(["send", bob.address, "more news", *state])
        assert sent.code == 0, sent.err
        assert await _order(state) == [ids["bob"], ids["alice"], ids["group"]]
        # Paging keeps the order, one at a time.
        assert await _order(state, limit=1) == [ids["bob"], ids["alice"], ids["group"]]


async def _order(state: list[str], limit: int = 50) -> list[str]:
    """The conversation ids `cone conversations` lists, page after page."""
    out: list[str] = []
    cursor: list[str] = []
    while True:
        page = await cone_cli(["conversations", "--limit", str(limit), *cursor, *state, "--json"])
        assert page.code == 0, page.err
        listed = page.json()
        out += [c["conversationId"] for c in listed["conversations"]]
        if not listed.get("cursor"):
            return out
        cursor = ["--cursor", listed["cursor"]]


def _named(name: str) -> ffi.FfiCreateGroupOptions:
    return ffi.FfiCreateGroupOptions(
        permissions=None, group_name=name, group_image_url_square=None,
        group_description=None, custom_permission_policy_set=None,
        message_disappearing_settings=None, app_data=None,
    )  # fmt: skip
