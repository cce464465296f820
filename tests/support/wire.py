"""A raw gRPC client of the XMTP node API, and identity updates built by hand.

For tests that speak to the devnet below libxmtp: malformed requests, exact paging,
stream ordering. Signatures in the identity updates are filler (the devnet does not
verify them; libxmtp would reject such updates when it reads them).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc
import grpc.aio

from conepb.xmtp import associations_pb2 as assoc
from conepb.xmtp import identity_api_pb2 as ident
from conepb.xmtp import identity_api_pb2_grpc as ident_grpc
from conepb.xmtp import mls_api_pb2 as mls
from conepb.xmtp import mls_api_pb2_grpc as mls_grpc
from support import mls as mls_bytes

ETHEREUM = assoc.IDENTIFIER_KIND_ETHEREUM


@dataclass
class Node:
    """Stubs of both node services on one channel."""

    channel: grpc.aio.Channel
    mls: mls_grpc.MlsApiStub
    identity: ident_grpc.IdentityApiStub


@asynccontextmanager
async def node(url: str) -> AsyncIterator[Node]:
    """A raw client of the node at `url` (http://host:port)."""
    channel = grpc.aio.insecure_channel(
        url.removeprefix("http://"),
        options=[("grpc.max_send_message_length", 64 << 20)],
    )
    try:
        yield Node(channel, mls_grpc.MlsApiStub(channel), ident_grpc.IdentityApiStub(channel))
    finally:
        await channel.close()


def address() -> str:
    """A random Ethereum address, lowercase."""
    return "0x" + os.urandom(20).hex()


def inbox_id(identifier: str, nonce: int = 0) -> str:
    """The inbox id an identifier and nonce derive."""
    return hashlib.sha256(f"{identifier}{nonce}".encode()).hexdigest()


def update(inbox: str, *actions: assoc.IdentityAction) -> bytes:
    """A serialized IdentityUpdate of `actions` on `inbox`."""
    message = assoc.IdentityUpdate(actions=list(actions), client_timestamp_ns=1, inbox_id=inbox)
    return bytes(message.SerializeToString())


def create_inbox(identifier: str, nonce: int = 0) -> assoc.IdentityAction:
    """CreateInbox for an Ethereum address."""
    return assoc.IdentityAction(
        create_inbox=assoc.CreateInbox(
            initial_identifier=identifier,
            nonce=nonce,
            initial_identifier_signature=os.urandom(70),
            initial_identifier_kind=ETHEREUM,
        )
    )


def add_address(identifier: str) -> assoc.IdentityAction:
    """AddAssociation of an Ethereum address."""
    return assoc.IdentityAction(
        add=assoc.AddAssociation(
            new_member_identifier=assoc.MemberIdentifier(ethereum_address=identifier),
            existing_member_signature=os.urandom(70),
            new_member_signature=os.urandom(70),
        )
    )


def add_installation(key: bytes) -> assoc.IdentityAction:
    """AddAssociation of an installation key."""
    return assoc.IdentityAction(
        add=assoc.AddAssociation(
            new_member_identifier=assoc.MemberIdentifier(installation_public_key=key),
            existing_member_signature=os.urandom(70),
            new_member_signature=os.urandom(70),
        )
    )


def revoke_address(identifier: str) -> assoc.IdentityAction:
    """RevokeAssociation of an Ethereum address."""
    return assoc.IdentityAction(
        revoke=assoc.RevokeAssociation(
            member_to_revoke=assoc.MemberIdentifier(ethereum_address=identifier),
            recovery_identifier_signature=os.urandom(70),
        )
    )


def change_recovery(identifier: str) -> assoc.IdentityAction:
    """ChangeRecoveryAddress to an Ethereum address."""
    return assoc.IdentityAction(
        change_recovery_address=assoc.ChangeRecoveryAddress(
            new_recovery_identifier=identifier,
            existing_recovery_identifier_signature=os.urandom(70),
            new_recovery_identifier_kind=ETHEREUM,
        )
    )


async def publish(n: Node, raw: bytes) -> None:
    """PublishIdentityUpdate of serialized update bytes."""
    await n.identity.PublishIdentityUpdate(ident.PublishIdentityUpdateRequest(identity_update=raw))


async def new_inbox(n: Node) -> tuple[str, str]:
    """Publish a fresh inbox for a random address; returns (address, inbox id)."""
    addr = address()
    inbox = inbox_id(addr)
    await publish(n, update(inbox, create_inbox(addr), add_installation(os.urandom(32))))
    return addr, inbox


async def inbox_of(n: Node, identifier: str, kind: int = ETHEREUM) -> str | None:
    """What GetInboxIds answers for one identifier (None when absent)."""
    response = await n.identity.GetInboxIds(
        ident.GetInboxIdsRequest(
            requests=[ident.GetInboxIdsRequest.Request(identifier=identifier, identifier_kind=kind)]
        )
    )
    (entry,) = response.responses
    assert entry.identifier == identifier
    return entry.inbox_id if entry.HasField("inbox_id") else None


def group_input(data: bytes) -> mls.GroupMessageInput:
    """A GroupMessageInput.V1 carrying `data`."""
    return mls.GroupMessageInput(v1=mls.GroupMessageInput.V1(data=data, sender_hmac=b"h"))


async def send(n: Node, group_id: bytes, count: int = 1, *, content_type: int = 1) -> None:
    """Send `count` PrivateMessages to a group, one call each."""
    for _ in range(count):
        data = mls_bytes.private_message(group_id, content_type=content_type)
        await n.mls.SendGroupMessages(mls.SendGroupMessagesRequest(messages=[group_input(data)]))


async def query(
    n: Node, group_id: bytes, *, direction: int = 0, limit: int = 0, cursor: int = 0
) -> mls.QueryGroupMessagesResponse:
    """One QueryGroupMessages page."""
    paging = mls.PagingInfo(direction=direction, limit=limit, id_cursor=cursor)
    response: mls.QueryGroupMessagesResponse = await n.mls.QueryGroupMessages(
        mls.QueryGroupMessagesRequest(group_id=group_id, paging_info=paging)
    )
    return response
