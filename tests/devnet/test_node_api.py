"""The devnet's node semantics, called below libxmtp with a raw gRPC client."""

from __future__ import annotations

import os

import grpc
import pytest

from conepb.xmtp import associations_pb2 as assoc
from conepb.xmtp import identity_api_pb2 as ident
from conepb.xmtp import mls_api_pb2 as mls
from support import mls as mls_bytes
from support import wire
from support.wire import (
    add_address,
    add_installation,
    change_recovery,
    create_inbox,
    inbox_of,
    publish,
    revoke_address,
    update,
)

ASC, DESC = mls.SORT_DIRECTION_ASCENDING, mls.SORT_DIRECTION_DESCENDING


async def test_identity_updates_come_back_verbatim_with_increasing_sequence_ids(
    devnet: str,
) -> None:
    async with wire.node(devnet) as n:
        addr, other = wire.address(), wire.address()
        inbox = wire.inbox_id(addr)
        first = update(inbox, create_inbox(addr), add_installation(os.urandom(32)))
        second = update(inbox, add_address(other))
        await publish(n, first)
        await wire.new_inbox(n)  # another inbox's update in between
        await publish(n, second)
        unknown = "0" * 64
        response = await n.identity.GetIdentityUpdates(
            ident.GetIdentityUpdatesRequest(
                requests=[
                    ident.GetIdentityUpdatesRequest.Request(inbox_id=inbox),
                    ident.GetIdentityUpdatesRequest.Request(inbox_id=unknown),
                ]
            )
        )
        mine, none = response.responses
        assert (mine.inbox_id, none.inbox_id, list(none.updates)) == (inbox, unknown, [])
        assert [u.update for u in mine.updates] == [first, second]
        seq = [u.sequence_id for u in mine.updates]
        assert seq[0] < seq[1] and all(u.server_timestamp_ns > 0 for u in mine.updates)
        later = await n.identity.GetIdentityUpdates(
            ident.GetIdentityUpdatesRequest(
                requests=[
                    ident.GetIdentityUpdatesRequest.Request(inbox_id=inbox, sequence_id=seq[0])
                ]
            )
        )
        assert [u.update for u in later.responses[0].updates] == [second]


async def test_inbox_ids_follow_create_add_revoke_and_ignore_recovery_changes(devnet: str) -> None:
    async with wire.node(devnet) as n:
        owner, shared, recovery = wire.address(), wire.address(), wire.address()
        first = wire.inbox_id(owner)
        await publish(n, update(first, create_inbox(owner), add_address(shared)))
        assert await inbox_of(n, owner) == first
        assert await inbox_of(n, owner.upper().replace("0X", "0x")) == first  # case-insensitive
        assert await inbox_of(n, shared) == first

        other_owner = wire.address()
        second = wire.inbox_id(other_owner)
        await publish(n, update(second, create_inbox(other_owner), add_address(shared)))
        assert await inbox_of(n, shared) == second  # the newest association wins

        await publish(n, update(second, revoke_address(shared)))
        assert await inbox_of(n, shared) == first  # back to the newest one not revoked
        await publish(n, update(first, change_recovery(recovery)))
        assert await inbox_of(n, recovery) is None  # recovery is not membership
        await publish(n, update(first, revoke_address(shared)))
        assert await inbox_of(n, shared) is None  # inbox_id absent, not empty
        assert await inbox_of(n, wire.address()) is None
        assert await inbox_of(n, owner, kind=assoc.IDENTIFIER_KIND_UNSPECIFIED) == first


async def test_key_packages_newest_wins_and_fetch_answers_each_key_in_order(devnet: str) -> None:
    async with wire.node(devnet) as n:
        a, b, unknown = os.urandom(32), os.urandom(32), os.urandom(32)
        packages = {}
        for key in (a, b, a):  # a uploads twice: the second one wins
            packages[key] = mls_bytes.key_package(key)
            await n.mls.UploadKeyPackage(
                mls.UploadKeyPackageRequest(
                    key_package=mls.KeyPackageUpload(key_package_tls_serialized=packages[key]),
                    is_inbox_id_credential=True,
                )
            )
        response = await n.mls.FetchKeyPackages(
            mls.FetchKeyPackagesRequest(installation_keys=[b, unknown, a])
        )
        assert [k.key_package_tls_serialized for k in response.key_packages] == [
            packages[b],
            b"",
            packages[a],
        ]


async def test_group_messages_share_one_increasing_id_sequence_and_duplicates_are_skipped(
    devnet: str,
) -> None:
    async with wire.node(devnet) as n:
        g1, g2 = os.urandom(16), os.urandom(16)
        commit = mls_bytes.private_message(g1, content_type=3)
        request = mls.SendGroupMessagesRequest(
            messages=[wire.group_input(commit), wire.group_input(mls_bytes.private_message(g2))]
        )
        await n.mls.SendGroupMessages(request)
        await n.mls.SendGroupMessages(request)  # a retried send stores nothing new
        await wire.send(n, g1)
        (page1, page2) = [(await wire.query(n, g, direction=ASC)).messages for g in (g1, g2)]
        assert len(page1) == 2 and len(page2) == 1
        ids = [page1[0].v1.id, page2[0].v1.id, page1[1].v1.id]
        assert ids == sorted(ids) and len(set(ids)) == 3 and ids[0] >= 1
        first = page1[0].v1
        assert (first.data, first.group_id, first.is_commit, first.sender_hmac) == (
            commit,
            g1,
            True,
            b"h",
        )
        assert not page1[1].v1.is_commit and first.created_ns > 0


async def test_group_message_paging_matches_the_reference_node(devnet: str) -> None:
    async with wire.node(devnet) as n:
        group = os.urandom(16)
        await n.mls.SendGroupMessages(
            mls.SendGroupMessagesRequest(
                messages=[wire.group_input(mls_bytes.private_message(group)) for _ in range(250)]
            )
        )
        everything = await wire.query(n, group, direction=ASC, limit=100)
        ids = [m.v1.id for m in everything.messages]
        assert len(ids) == 100 and everything.paging_info.id_cursor == ids[-1]

        # Unspecified direction is DESCENDING, and limit 0 or above 100 means 100.
        for limit in (0, 101, 5000):
            page = await wire.query(n, group, limit=limit)
            assert page.paging_info.direction == DESC and page.paging_info.limit == 100
            assert len(page.messages) == 100
            assert page.messages[0].v1.id > page.messages[-1].v1.id

        collected, cursor = [], 0
        while True:
            page = await wire.query(n, group, direction=ASC, limit=100, cursor=cursor)
            collected += [m.v1.id for m in page.messages]
            cursor = page.paging_info.id_cursor
            if cursor == 0:
                break
        assert len(collected) == 250 and collected == sorted(collected)
        assert len(page.messages) == 50  # the short last page ends the loop with cursor 0

        small = await wire.query(n, group, direction=ASC, limit=7, cursor=collected[9])
        assert [m.v1.id for m in small.messages] == collected[10:17]
        assert small.paging_info.id_cursor == collected[16]  # a full page sets the cursor
        down = await wire.query(n, group, direction=DESC, limit=3, cursor=collected[9])
        assert [m.v1.id for m in down.messages] == collected[8:5:-1]
        assert (await wire.query(n, os.urandom(16))).paging_info.id_cursor == 0


async def test_welcomes_and_pointers_are_stored_under_any_32_byte_key(devnet: str) -> None:
    async with wire.node(devnet) as n:
        installation, destination = os.urandom(32), os.urandom(32)
        v1 = mls.WelcomeMessageInput.V1
        pointer = mls.WelcomeMessageInput.WelcomePointer
        messages = [
            mls.WelcomeMessageInput(
                v1=v1(installation_key=installation, data=b"w1", hpke_public_key=b"k")
            ),
            mls.WelcomeMessageInput(
                v1=v1(installation_key=destination, data=b"pointee", wrapper_algorithm=3)
            ),
            mls.WelcomeMessageInput(
                welcome_pointer=pointer(
                    installation_key=installation,
                    welcome_pointer=b"p",
                    hpke_public_key=b"k2",
                    wrapper_algorithm=2,
                )
            ),
        ]
        await n.mls.SendWelcomeMessages(mls.SendWelcomeMessagesRequest(messages=messages))
        await n.mls.SendWelcomeMessages(mls.SendWelcomeMessagesRequest(messages=messages))
        mine = await n.mls.QueryWelcomeMessages(
            mls.QueryWelcomeMessagesRequest(
                installation_key=installation, paging_info=mls.PagingInfo(direction=ASC)
            )
        )
        assert [m.WhichOneof("version") for m in mine.messages] == ["v1", "welcome_pointer"]
        welcome, ptr = mine.messages[0].v1, mine.messages[1].welcome_pointer
        assert (welcome.data, welcome.hpke_public_key, welcome.wrapper_algorithm) == (
            b"w1",
            b"k",
            1,
        )
        assert (ptr.welcome_pointer, ptr.hpke_public_key, ptr.wrapper_algorithm) == (b"p", b"k2", 2)
        assert welcome.id < ptr.id
        pointee = await n.mls.QueryWelcomeMessages(
            mls.QueryWelcomeMessagesRequest(installation_key=destination)
        )
        (only,) = pointee.messages
        assert (only.v1.data, only.v1.wrapper_algorithm, only.v1.hpke_public_key) == (
            b"pointee",
            3,
            b"",
        )


async def test_commit_log_entries_are_stored_per_group_and_queried_ascending(devnet: str) -> None:
    async with wire.node(devnet) as n:
        g1, g2 = os.urandom(16), os.urandom(16)
        entries = [
            mls.PublishCommitLogRequest(
                group_id=g, serialized_commit_log_entry=f"e{i}".encode(), signature=b"sig"
            )
            for i, g in enumerate((g1, g2, g1))
        ]
        await n.mls.BatchPublishCommitLog(mls.BatchPublishCommitLogRequest(requests=entries))
        await n.mls.BatchPublishCommitLog(mls.BatchPublishCommitLogRequest(requests=entries[:1]))
        response = await n.mls.BatchQueryCommitLog(
            mls.BatchQueryCommitLogRequest(
                requests=[
                    mls.QueryCommitLogRequest(group_id=g1),
                    mls.QueryCommitLogRequest(group_id=os.urandom(16)),
                    mls.QueryCommitLogRequest(
                        group_id=g2, paging_info=mls.PagingInfo(direction=ASC, limit=1)
                    ),
                ]
            )
        )
        first, empty, second = response.responses
        assert first.group_id == g1
        assert [e.serialized_commit_log_entry for e in first.commit_log_entries] == [b"e0", b"e2"]
        assert first.commit_log_entries[0].sequence_id < first.commit_log_entries[1].sequence_id
        assert first.commit_log_entries[0].signature == b"sig"
        assert list(empty.commit_log_entries) == [] and empty.paging_info.id_cursor == 0
        (only,) = second.commit_log_entries
        assert second.paging_info.id_cursor == only.sequence_id  # a full page of 1


async def test_newest_group_message_answers_each_group_in_request_order(devnet: str) -> None:
    async with wire.node(devnet) as n:
        g1, g2, empty = os.urandom(16), os.urandom(16), os.urandom(16)
        await wire.send(n, g1, 3)
        await wire.send(n, g2, 1, content_type=3)
        newest_g1 = (await wire.query(n, g1)).messages[0].v1
        request = mls.GetNewestGroupMessageRequest(group_ids=[g2, empty, g1])
        bare = await n.mls.GetNewestGroupMessage(request)
        assert [r.HasField("group_message") for r in bare.responses] == [True, False, True]
        last = bare.responses[2].group_message.v1
        assert (last.id, last.group_id, last.created_ns, last.data) == (
            newest_g1.id,
            g1,
            newest_g1.created_ns,
            b"",
        )
        assert bare.responses[0].group_message.v1.is_commit
        request.include_content = True
        full = await n.mls.GetNewestGroupMessage(request)
        assert full.responses[2].group_message.v1.data == newest_g1.data


async def test_smart_contract_wallet_checks_get_one_invalid_verdict_per_signature(
    devnet: str,
) -> None:
    async with wire.node(devnet) as n:
        signature = ident.VerifySmartContractWalletSignatureRequestSignature(
            account_id="eip155:1:0x" + "11" * 20, signature=b"s", hash=os.urandom(32)
        )
        response = await n.identity.VerifySmartContractWalletSignatures(
            ident.VerifySmartContractWalletSignaturesRequest(signatures=[signature] * 3)
        )
        assert [(r.is_valid, r.HasField("error")) for r in response.responses] == [
            (False, True)
        ] * 3


async def test_an_inbox_is_created_once_and_holds_at_most_256_updates(devnet: str) -> None:
    async with wire.node(devnet) as n:
        addr, inbox = await wire.new_inbox(n)
        with pytest.raises(grpc.aio.AioRpcError) as again:
            await publish(n, update(inbox, create_inbox(addr)))
        assert again.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        for _ in range(255):
            await publish(n, update(inbox, add_installation(os.urandom(32))))
        with pytest.raises(grpc.aio.AioRpcError) as full:
            await publish(n, update(inbox, add_installation(os.urandom(32))))
        assert full.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert await inbox_of(n, addr) == inbox
