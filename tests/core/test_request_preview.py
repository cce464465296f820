"""RequestPreview: an operator looks at a request (who, its first message) before
accepting it, and nothing is delivered: no consumer receives the message until the
conversation is accepted (docs/web.md, "Requests")."""

from __future__ import annotations

from typing import Any

import pytest

from cone.errors import FailedPrecondition, NotFound
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import until


async def _dm_to_daemon(peer: Peer, daemon: DaemonProcess) -> Any:
    from xmtp_bindings import xmtpv3 as ffi

    ident = await daemon.client.identity()
    return await peer.client.conversations().find_or_create_dm_by_identity(
        ffi.FfiIdentifier(identifier=ident.address, identifier_kind=ffi.FfiIdentifierKind.ETHEREUM),
        ffi.FfiCreateDmOptions(message_disappearing_settings=None),
    )


async def _preview(daemon: DaemonProcess, conversation_id: str) -> pb.RequestPreviewResponse:
    return await daemon.client.call(
        "RequestPreview", pb.RequestPreviewRequest(conversation_id=conversation_id)
    )


async def _receive(daemon: DaemonProcess) -> list[str]:
    answer = await daemon.client.call("Receive", pb.ReceiveRequest(limit=10))
    return [m.text for m in answer.messages]


async def test_a_request_is_shown_with_its_first_message_and_delivered_only_once_accepted(
    daemon: DaemonProcess, alice: Peer
) -> None:
    dm = await _dm_to_daemon(alice, daemon)
    await alice.send(dm, "hello, it is alice")
    await alice.send(dm, "and a second one")
    cid = bytes(dm.id()).hex()

    async def held() -> pb.RequestPreviewResponse | None:
        try:
            answer = await _preview(daemon, cid)
        except NotFound:
            return None  # not recorded yet
        return answer if answer.request.pending_messages == 2 else None

    preview = await until(held)
    assert preview.request.conversation_id == cid
    assert preview.request.conversation_type == pb.CONVERSATION_TYPE_DM
    assert preview.request.peer_inbox_id == alice.inbox_id
    assert preview.request.peer_address.lower() == alice.address.lower()
    assert preview.first_message.text == "hello, it is alice"  # the first, not the newest
    assert preview.first_message.sender_inbox_id == alice.inbox_id
    # Looked at, still a request: no consumer has it, no receipt moved.
    assert await _receive(daemon) == []
    assert [
        r.conversation_id
        for r in (await daemon.client.call("Requests", pb.RequestsRequest())).requests
    ] == [cid]
    await daemon.client.call("Accept", pb.AcceptRequest(conversation_id=cid))
    assert await _receive(daemon) == ["hello, it is alice", "and a second one"]
    # Accepted: no longer a request to preview.
    with pytest.raises(FailedPrecondition) as refused:
        await _preview(daemon, cid)
    assert refused.value.reason == "not_a_request"
    with pytest.raises(NotFound) as unknown:
        await _preview(daemon, "cd" * 16)
    assert unknown.value.reason == "unknown_conversation"
