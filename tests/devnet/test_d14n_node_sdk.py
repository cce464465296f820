"""The official XMTP Node SDK in D14N mode (`gatewayHost`) and raw libxmtp 1.10 clients
in D14N mode talk through the devnet alone: DMs, group messages, members added and
removed, streams; also the SDK's 6.1 nightly on libxmtp 1.11, which streams with
SubscribeTopics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import Devnet
from cone.engine._client import identifier
from support.node_peer import SDK_NEXT, NodePeer
from support.peers import MessageStream, Peer
from support.waiting import until


async def _sdk_texts(sdk: NodePeer, conversation_id: str) -> list[str]:
    return [
        m["content"]
        for m in await sdk.messages(conversation_id)
        if m["contentType"] == "xmtp.org/text:1.0"
    ]


async def _has(sdk: NodePeer, text: str) -> bool:
    return text in await sdk.streamed()


async def _bob_and_carol(url: str, tmp_path: Path) -> tuple[Peer, Peer, MessageStream]:
    """Two raw D14N clients, and Bob's stream, open before the SDK starts."""
    bob = await Peer.create(url, tmp_path, "bob", d14n=True)
    carol = await Peer.create(url, tmp_path, "carol", d14n=True)
    return bob, carol, await bob.stream_all()


async def _sdk_group_with(
    sdk: NodePeer, bob: Peer, bob_stream: MessageStream, text: str
) -> tuple[str, Any]:
    """The SDK, streaming, makes a group with Bob and says `text`, which Bob's stream
    gets; returns the group's id and Bob's side of it."""
    await sdk.stream()
    gid = await sdk.group(bob.inbox_id)
    await sdk.send(gid, "text", text)
    assert await bob_stream.texts(1) == [text]
    await bob.sync()
    return gid, bob.conversation(bytes.fromhex(gid))


async def test_the_node_sdk_in_d14n_mode_talks_with_raw_d14n_clients(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    bob, carol, bob_stream = await _bob_and_carol(url, tmp_path)
    async with NodePeer.start(url, tmp_path, d14n=True) as sdk:
        gid, bob_group = await _sdk_group_with(sdk, bob, bob_stream, "sdk-0")
        await bob.send(bob_group, "bob-0")
        await until(lambda: _has(sdk, "bob-0"))

        await sdk.add_members(gid, carol.inbox_id)
        await carol.sync()
        carol_group = carol.conversation(bytes.fromhex(gid))
        await carol.send(carol_group, "carol-0")
        await until(lambda: _has(sdk, "carol-0"))
        await sdk.remove_members(gid, carol.inbox_id)
        await sdk.send(gid, "text", "after removal")
        assert await bob_stream.texts(2) == ["carol-0", "after removal"]
        assert await _sdk_texts(sdk, gid) == ["sdk-0", "bob-0", "carol-0", "after removal"]
        await carol.sync()
        assert not carol_group.is_active()
        assert await carol.texts(bytes.fromhex(gid), sync=False) == ["carol-0"]

        opts = ffi.FfiCreateDmOptions(message_disappearing_settings=None)
        dm = await bob.client.conversations().find_or_create_dm_by_identity(
            identifier(sdk.address), opts
        )
        await bob.send(dm, "dm from bob")
        await until(lambda: _has(sdk, "dm from bob"))
        await sdk.send(dm.id().hex(), "text", "dm from sdk")
        assert await bob_stream.texts(1) == ["dm from sdk"]
    # Every unary call, the SDK's included, was a D14N one.
    assert all(m.startswith("/xmtp.xmtpv4.") for m in devnet_node.stats.methods)
    await bob_stream.end()


async def test_the_node_sdk_on_v3_and_a_raw_client_on_d14n_share_a_group(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    bob, carol, bob_stream = await _bob_and_carol(url, tmp_path)
    async with NodePeer.start(url, tmp_path) as sdk:  # V3 mode
        gid, bob_group = await _sdk_group_with(sdk, bob, bob_stream, "from v3")
        await bob_group.add_members([carol.inbox_id])  # a D14N commit the V3 SDK applies
        await bob.send(bob_group, "from d14n")
        await until(lambda: _has(sdk, "from d14n"))
        await carol.sync()
        await carol.send(carol.conversation(bytes.fromhex(gid)), "from carol")
        await until(lambda: _has(sdk, "from carol"))
        assert await _sdk_texts(sdk, gid) == ["from v3", "from d14n", "from carol"]
    await bob_stream.end()


async def test_the_node_sdk_on_libxmtp_1_11_streams_with_subscribe_topics_and_talks_with_1_10(
    devnet_node: Devnet, tmp_path: Path
) -> None:
    url = devnet_node.url
    bob, carol, bob_stream = await _bob_and_carol(url, tmp_path)
    async with NodePeer.start(url, tmp_path, d14n=True, sdk=SDK_NEXT) as sdk:
        gid, bob_group = await _sdk_group_with(sdk, bob, bob_stream, "from 1.11")
        await bob.send(bob_group, "from 1.10")
        await until(lambda: _has(sdk, "from 1.10"))  # through SubscribeTopics
        await sdk.add_members(gid, carol.inbox_id)
        await carol.sync()
        await carol.send(carol.conversation(bytes.fromhex(gid)), "from carol")
        await until(lambda: _has(sdk, "from carol"))
        await sdk.remove_members(gid, carol.inbox_id)
        await sdk.send(gid, "text", "after removal")
        assert await bob_stream.texts(2) == ["from carol", "after removal"]
        assert await _sdk_texts(sdk, gid) == [
            "from 1.11",
            "from 1.10",
            "from carol",
            "after removal",
        ]
    assert all(m.startswith("/xmtp.xmtpv4.") for m in devnet_node.stats.methods)
    assert "/xmtp.xmtpv4.message_api.ReplicationApi/SubscribeTopics" in devnet_node.stats.streams
    await bob_stream.end()
