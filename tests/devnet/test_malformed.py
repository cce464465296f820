"""Malformed calls get INVALID_ARGUMENT, store nothing, and the node keeps serving."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import grpc
import pytest

from cone.devnet import MAX_PAYLOAD_BYTES
from conepb.xmtp import identity_api_pb2 as ident
from conepb.xmtp import mls_api_pb2 as mls
from support import mls as mls_bytes
from support import wire

GROUP = bytes(16)  # the one group every malformed call below would touch
KEY = bytes(32)  # the one installation key every malformed call below would touch
Call = Callable[[wire.Node], Awaitable[object]]


def _send(*datas: bytes) -> Call:
    request = mls.SendGroupMessagesRequest(messages=[wire.group_input(d) for d in datas])
    return lambda n: n.mls.SendGroupMessages(request)


def _welcome(**fields: object) -> Call:
    v1 = mls.WelcomeMessageInput.V1(**{"installation_key": KEY, "data": b"w", **fields})
    request = mls.SendWelcomeMessagesRequest(messages=[mls.WelcomeMessageInput(v1=v1)])
    return lambda n: n.mls.SendWelcomeMessages(request)


def _upload(key_package: bytes) -> Call:
    request = mls.UploadKeyPackageRequest(
        key_package=mls.KeyPackageUpload(key_package_tls_serialized=key_package)
    )
    return lambda n: n.mls.UploadKeyPackage(request)


def _publish(raw: bytes) -> Call:
    request = ident.PublishIdentityUpdateRequest(identity_update=raw)
    return lambda n: n.identity.PublishIdentityUpdate(request)


_GOOD = mls_bytes.private_message(GROUP)
_ADDRESS = "0x" + "ab" * 20
_INBOX = wire.inbox_id(_ADDRESS)
_pointer = mls.WelcomeMessageInput.WelcomePointer(
    installation_key=KEY, welcome_pointer=b"p", hpke_public_key=b"k", wrapper_algorithm=0
)

MALFORMED: dict[str, Call] = {
    "garbage instead of an MLSMessage": _send(os.urandom(40)),
    "a truncated PrivateMessage": _send(_GOOD[:-5]),
    "trailing bytes after a PrivateMessage": _send(_GOOD + b"\0"),
    "a Welcome, not a protocol message": _send(b"\0\1\0\3" + _GOOD[4:]),
    "a KeyPackage as a group message": _send(b"\0\1\0\5" + _GOOD[4:]),
    "an unknown content type": _send(mls_bytes.private_message(GROUP, content_type=9)),
    "an empty group id": _send(mls_bytes.private_message(b"")),
    "empty data": _send(b""),
    "an oversized payload": lambda n: _send(
        mls_bytes.private_message(GROUP, ciphertext=bytes(MAX_PAYLOAD_BYTES))
    )(n),
    "one bad message in a good batch": _send(_GOOD, b"\0\1\0\2junk"),
    "no messages": lambda n: n.mls.SendGroupMessages(mls.SendGroupMessagesRequest()),
    "a message without v1": lambda n: n.mls.SendGroupMessages(
        mls.SendGroupMessagesRequest(messages=[mls.GroupMessageInput()])
    ),
    "a welcome to a 31-byte key": _welcome(installation_key=bytes(31), hpke_public_key=b"k"),
    "a welcome without its HPKE key": _welcome(),
    "a welcome with an unknown wrapper": _welcome(hpke_public_key=b"k", wrapper_algorithm=7),
    "a pointer with the wrong wrapper": lambda n: n.mls.SendWelcomeMessages(
        mls.SendWelcomeMessagesRequest(messages=[mls.WelcomeMessageInput(welcome_pointer=_pointer)])
    ),
    "a key package cut short": _upload(mls_bytes.key_package(KEY)[:-1]),
    "an MLSMessage as a key package": _upload(_GOOD),
    "no key package": _upload(b""),
    "an identity update that is not protobuf": _publish(b"\x0a\xff\x01"),
    "an identity update for a bad inbox id": _publish(
        wire.update("not-hex", wire.create_inbox(_ADDRESS))
    ),
    "an inbox id its identifier does not derive": _publish(
        wire.update("0" * 64, wire.create_inbox(_ADDRESS))
    ),
    "an update to an inbox never created": _publish(
        wire.update(_INBOX, wire.add_address("0x" + "cd" * 20))
    ),
    "a CreateInbox that is not the first action": _publish(
        wire.update(_INBOX, wire.change_recovery(_ADDRESS), wire.create_inbox(_ADDRESS))
    ),
    "an update with no actions": _publish(wire.update(_INBOX)),
    "eleven commit-log entries": lambda n: n.mls.BatchPublishCommitLog(
        mls.BatchPublishCommitLogRequest(
            requests=[
                mls.PublishCommitLogRequest(
                    group_id=GROUP, serialized_commit_log_entry=b"e", signature=b"s"
                )
            ]
            * 11
        )
    ),
    "a descending commit-log query": lambda n: n.mls.BatchQueryCommitLog(
        mls.BatchQueryCommitLogRequest(
            requests=[
                mls.QueryCommitLogRequest(
                    group_id=GROUP,
                    paging_info=mls.PagingInfo(direction=mls.SORT_DIRECTION_DESCENDING),
                )
            ]
        )
    ),
    "a query without a group id": lambda n: n.mls.QueryGroupMessages(
        mls.QueryGroupMessagesRequest()
    ),
}


async def _state(n: wire.Node) -> tuple[object, ...]:
    """Everything the malformed calls could have touched."""
    messages = await wire.query(n, GROUP)
    welcomes = await n.mls.QueryWelcomeMessages(
        mls.QueryWelcomeMessagesRequest(installation_key=KEY)
    )
    packages = await n.mls.FetchKeyPackages(mls.FetchKeyPackagesRequest(installation_keys=[KEY]))
    updates = await n.identity.GetIdentityUpdates(
        ident.GetIdentityUpdatesRequest(
            requests=[ident.GetIdentityUpdatesRequest.Request(inbox_id=_INBOX)]
        )
    )
    log = await n.mls.BatchQueryCommitLog(
        mls.BatchQueryCommitLogRequest(requests=[mls.QueryCommitLogRequest(group_id=GROUP)])
    )
    return (
        messages.SerializeToString(),
        welcomes.SerializeToString(),
        packages.SerializeToString(),
        updates.SerializeToString(),
        log.SerializeToString(),
        await wire.inbox_of(n, _ADDRESS),
    )


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_malformed_call_is_invalid_argument_and_changes_nothing(
    devnet: str, case: str
) -> None:
    async with wire.node(devnet) as n:
        await wire.send(n, GROUP, 2)  # some state for the bad call to leave alone
        before = await _state(n)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await MALFORMED[case](n)
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
        assert refused.value.details()
        assert await _state(n) == before
        await wire.send(n, GROUP)  # and the node keeps serving
        assert len((await wire.query(n, GROUP)).messages) == 3


async def test_a_method_libxmtp_no_longer_calls_is_unimplemented(devnet: str) -> None:
    async with wire.node(devnet) as n:
        legacy = n.channel.unary_unary("/xmtp.mls.api.v1.MlsApi/RegisterInstallation")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await legacy(b"")
        assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED
