"""Stored rows to XMTP wire messages, and the payload limit every input is held to."""

from __future__ import annotations

from typing import Final

from cone.devnet.store import GroupMessageRow, WelcomeRow
from cone.errors import InvalidArgument
from conepb.xmtp import mls_api_pb2 as mls

#: The largest payload (group message, welcome, key package, identity update,
#: commit-log entry) the devnet stores: libxmtp's own gRPC message limit, so no
#: libxmtp client can send a larger one.
MAX_PAYLOAD_BYTES: Final = 25 * 1024 * 1024

#: gRPC message limit in both directions: above any valid request, so that an
#: oversized payload reaches the handler and gets INVALID_ARGUMENT with a reason.
GRPC_MESSAGE_LIMIT: Final = 2 * MAX_PAYLOAD_BYTES


def require_payload(payload: bytes, field: str) -> None:
    """Reject an empty payload or one above MAX_PAYLOAD_BYTES."""
    if not payload:
        raise InvalidArgument(f"{field} is empty", field=field)
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise InvalidArgument(
            f"{field} has {len(payload)} bytes, above the devnet's limit of "
            f"{MAX_PAYLOAD_BYTES} (25 MiB)",
            field=field,
        )


def group_message(row: GroupMessageRow, *, include_content: bool = True) -> mls.GroupMessage:
    """The wire form of a stored group message."""
    v1 = mls.GroupMessage.V1(
        id=row.id, created_ns=row.created_ns, group_id=row.group_id, is_commit=row.is_commit
    )
    if include_content:
        v1.data = row.data
        v1.sender_hmac = row.sender_hmac
        v1.should_push = row.should_push
    return mls.GroupMessage(v1=v1)


def welcome_message(row: WelcomeRow) -> mls.WelcomeMessage:
    """The wire form of a stored welcome or welcome pointer."""
    if row.is_pointer:
        return mls.WelcomeMessage(
            welcome_pointer=mls.WelcomeMessage.WelcomePointer(
                id=row.id,
                created_ns=row.created_ns,
                installation_key=row.installation_key,
                welcome_pointer=row.data,
                hpke_public_key=row.hpke_public_key,
                wrapper_algorithm=row.wrapper_algorithm,
            )
        )
    return mls.WelcomeMessage(
        v1=mls.WelcomeMessage.V1(
            id=row.id,
            created_ns=row.created_ns,
            installation_key=row.installation_key,
            data=row.data,
            hpke_public_key=row.hpke_public_key,
            wrapper_algorithm=row.wrapper_algorithm,
            welcome_metadata=row.welcome_metadata,
        )
    )
