"""The bridge and XMTP content, against the official Node SDK as the peer: reactions
start no turn unless asked, attachments reach the agent as files in a private
per-turn directory, and the agent answers with markdown, a reaction and a file."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conepb.v1 import cone_pb2 as pb
from support.node_peer import NodePeer
from support.waiting import until

from ._helpers import settled
from .conftest import Agent, BridgeProcess

pytestmark = pytest.mark.timeout(180)

# Logs what it got (kinds, reactions, files with their modes and digests) and
# answers text.
NOTE_AND_ECHO = """\
def describe(m):
    files = [m["attachment"]] if "attachment" in m else m.get("attachments", [])
    out = []
    for f in files:
        st = os.stat(f["path"])
        data = open(f["path"], "rb").read()
        out.append({**f, "mode": oct(st.st_mode & 0o777),
                    "dirMode": oct(os.stat(os.path.dirname(f["path"])).st_mode & 0o777),
                    "digest": __import__("hashlib").sha256(data).hexdigest()})
    return {"type": m["contentType"], "reaction": m.get("reaction"), "files": out}
note("end", got=[describe(m) for m in turn["messages"]],
     held=[describe(m) for m in turn["context"]])
print("ok: " + ", ".join(m["contentType"] for m in turn["messages"]))
"""


async def _accept(bridge: BridgeProcess, cid: str) -> None:
    async def requested() -> bool:
        reqs = await bridge.client.call("Requests", pb.RequestsRequest())
        return any(r.conversation_id == cid for r in reqs.requests)

    await until(requested)
    await bridge.client.call("Accept", pb.AcceptRequest(conversation_id=cid))


async def _from_agent(sdk: NodePeer, cid: str, n: int) -> list[dict[str, Any]]:
    async def enough() -> list[dict[str, Any]]:
        got = [m for m in await sdk.messages(cid) if m["senderInboxId"] != sdk.inbox_id]
        got = [m for m in got if not m["contentType"].startswith("xmtp.org/group_updated")]
        return got if len(got) >= n else []

    return await until(enough)


def _reaction(to: str, inbox: str, emoji: str = "👍") -> dict[str, Any]:
    return {"reference": to, "referenceInboxId": inbox, "action": 1, "content": emoji, "schema": 1}


async def test_a_reaction_starts_no_turn_and_comes_as_context_of_the_next(
    home: Path, devnet: str, tmp_path: Path, agent: Callable[[str], Agent]
) -> None:
    noting = agent(NOTE_AND_ECHO)
    async with BridgeProcess(home, devnet, noting.argv) as bridge:
        ident = await bridge.client.identity()
        async with NodePeer.start(devnet, tmp_path) as sdk:
            cid = await sdk.dm(ident.inbox_id)
            await sdk.send(cid, "text", "hi")
            await _accept(bridge, cid)
            (answer,) = await _from_agent(sdk, cid, 1)
            await sdk.send(cid, "reaction", _reaction(answer["id"], ident.inbox_id))
            await until(lambda: _held_as_context(bridge, 1, arrived=2))
            assert len(noting.events("start")) == 1
            await sdk.send(cid, "text", "thanks")
            await _from_agent(sdk, cid, 2)
            await settled(bridge)
    second = noting.events("end")[1]
    assert [g["type"] for g in second["got"]] == ["xmtp.org/text:1.0"]
    (held,) = second["held"]
    assert held["reaction"]["messageId"] == answer["id"] and held["reaction"]["emoji"] == "👍"


async def _held(bridge: BridgeProcess, n: int) -> bool:
    await bridge.client.call("Sync", pb.SyncRequest())
    status = await bridge.client.call("Status", pb.StatusRequest())
    return bool(status.inbox_messages >= n)


async def _held_as_context(bridge: BridgeProcess, n: int, arrived: int) -> bool:
    """`n` messages held as context once `arrived` messages are in the inbox: taken
    off the bridge's consumer, pending on its context consumer. Each part alone is also
    true before the last message arrived, and a loaded machine did both: nothing
    pending on the bridge's consumer (the next text then came in the same batch), and
    one pending on the context consumer while the first DM turn's own message still
    was (its ack there runs in the background as the command starts)."""
    status = await bridge.client.call("Status", pb.StatusRequest())
    if status.inbox_messages < arrived:
        return False
    return await bridge.pending() == 0 and await bridge.pending("bridge.context") == n


async def test_with_reactions_on_a_reaction_to_the_agent_addresses_it_in_a_group(
    home: Path, devnet: str, tmp_path: Path, agent: Callable[[str], Agent]
) -> None:
    noting = agent(NOTE_AND_ECHO)
    options = ["--alias", "bot", "--reactions"]
    async with BridgeProcess(home, devnet, noting.argv, options) as bridge:
        ident = await bridge.client.identity()
        async with NodePeer.start(devnet, tmp_path) as sdk:
            cid = await sdk.group(ident.inbox_id)
            mine = await sdk.send(cid, "text", "hello @bot")
            await _accept(bridge, cid)
            (answer,) = await _from_agent(sdk, cid, 1)
            # A reaction to someone else's message does not address the agent...
            await sdk.send(cid, "reaction", _reaction(mine, sdk.inbox_id, "😀"))
            await until(lambda: _held_as_context(bridge, 1, arrived=2))
            assert len(noting.events("start")) == 1
            # ...one to the agent's own message does.
            await sdk.send(cid, "reaction", _reaction(answer["id"], ident.inbox_id, "🎉"))
            await _from_agent(sdk, cid, 2)
            await settled(bridge)
    second = noting.events("end")[1]
    assert [g["reaction"]["emoji"] for g in second["got"]] == ["🎉"]
    assert [h["reaction"]["emoji"] for h in second["held"]] == ["😀"]


# Answers with markdown, a reaction to the first message and the first file back.
ANSWER_IN_KIND = """\
import json
files = [m["attachment"] for m in turn["messages"] if "attachment" in m]
note("end", files=files, dir=os.environ.get("CONE_TURN_DIR"),
     dirMode=oct(os.stat(os.environ["CONE_TURN_DIR"]).st_mode & 0o777),
     data=[open(f["path"], "rb").read().hex() for f in files])
print(json.dumps({"replies": [
    {"markdown": "**got** " + str(len(files)) + " file(s)"},
    {"reaction": {"messageId": turn["messages"][0]["messageId"], "emoji": "👀"}},
    {"attachment": {"path": files[0]["path"], "mimeType": "application/octet-stream",
                    "filename": "back.bin"}},
]}))
"""


async def test_attachments_arrive_as_files_and_the_agent_answers_in_kind(
    home: Path, devnet: str, tmp_path: Path, agent: Callable[[str], Agent]
) -> None:
    big = os.urandom(300_000)  # over the inline limit: the bridge fetches it
    small = b"small file"
    answering = agent(ANSWER_IN_KIND)
    async with BridgeProcess(home, devnet, answering.argv) as bridge:
        ident = await bridge.client.identity()
        async with NodePeer.start(devnet, tmp_path) as sdk:
            cid = await sdk.dm(ident.inbox_id)
            first = await sdk.send(
                cid,
                "attachment",
                {"filename": "../../etc/big.bin", "mimeType": "application/zip",
                 "content": base64.b64encode(big).decode()},
            )  # fmt: skip
            await sdk.send(
                cid,
                "attachment",
                {
                    "filename": "n.txt",
                    "mimeType": "text/plain",
                    "content": base64.b64encode(small).decode(),
                },
            )
            await until(lambda: _held(bridge, 2))  # both in the inbox: one turn
            await _accept(bridge, cid)
            got = await _from_agent(sdk, cid, 2)
            await settled(bridge)
            everything = await sdk.messages(cid)
    (end,) = answering.events("end")
    assert [bytes.fromhex(d) for d in end["data"]] == [big, small]
    paths = [Path(f["path"]) for f in end["files"]]
    assert all(p.parent == Path(end["dir"]) for p in paths)
    assert paths[0].name.endswith("-big.bin")  # the sender's path is not followed
    assert end["dirMode"] == "0o700"
    assert [(f["mimeType"], f["size"]) for f in end["files"]] == [
        ("application/zip", len(big)),
        ("text/plain", len(small)),
    ]
    assert all("data" not in f for f in end["files"])
    assert not await asyncio.to_thread(os.path.exists, end["dir"])  # removed at turn end
    by_type = {m["contentType"]: m for m in got}
    assert by_type["xmtp.org/markdown:1.0"]["content"] == "**got** 2 file(s)"
    back = by_type["xmtp.org/attachment:1.0"]["content"]
    assert back["filename"] == "back.bin"
    assert (
        hashlib.sha256(base64.b64decode(back["content"]["base64"])).digest()
        == hashlib.sha256(big).digest()
    )
    reacted = next(m for m in everything if m["id"] == first)
    assert [r["content"] for r in reacted["reactions"]] == ["👀"]
