"""`xmtp.mls.api.v1.MlsApi`: group messages, welcomes, key packages, commit logs.

Each request is validated whole before anything is stored, so a bad entry anywhere
in a batch stores nothing. Streams are served by `streams.py`.
"""

from __future__ import annotations

import time
from typing import Any, Final

from google.protobuf import empty_pb2

from cone.devnet import paging, wire
from cone.devnet.hub import Hub
from cone.devnet.mls_framing import FramingError, parse_key_package, parse_protocol_message
from cone.devnet.store import CommitLogRow, GroupMessageRow, Store, WelcomeRow
from cone.devnet.streams import StreamServer
from cone.errors import InvalidArgument
from conepb.xmtp import message_contents_pb2 as contents
from conepb.xmtp import mls_api_pb2 as mls
from conepb.xmtp import mls_api_pb2_grpc as mls_grpc

_Context = Any  # grpc.aio.ServicerContext; handlers never touch it beyond streams

#: Installation keys (and welcome destinations) are 32-byte Ed25519 public keys.
KEY_BYTES: Final = 32
MAX_COMMIT_LOG_PUBLISH: Final = 10
MAX_COMMIT_LOG_QUERIES: Final = 20
MAX_NEWEST_GROUP_IDS: Final = 1000

_WRAP_CURVE25519: Final = contents.WELCOME_WRAPPER_ALGORITHM_CURVE25519
_WRAP_SYMMETRIC: Final = contents.WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY
_WELCOME_WRAPPERS: Final = frozenset(contents.WelcomeWrapperAlgorithm.values()) - {0}
_POINTER_WRAP_XWING: Final = contents.WELCOME_POINTER_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6


class MlsService(mls_grpc.MlsApiServicer):
    """The MLS delivery service over one store."""

    def __init__(
        self,
        store: Store,
        groups: Hub[GroupMessageRow],
        welcomes: Hub[WelcomeRow],
        streams: StreamServer,
    ) -> None:
        self._store = store
        self._groups = groups
        self._welcomes = welcomes
        self._streams = streams

    async def SendGroupMessages(
        self, request: mls.SendGroupMessagesRequest, context: _Context
    ) -> empty_pb2.Empty:
        if not request.messages:
            raise InvalidArgument("no messages to send", field="messages")
        rows = [group_message_row(f"messages[{i}]", m) for i, m in enumerate(request.messages)]
        self._groups.publish(self._store.add_group_messages(rows, time.time_ns()))
        return empty_pb2.Empty()

    async def QueryGroupMessages(
        self, request: mls.QueryGroupMessagesRequest, context: _Context
    ) -> mls.QueryGroupMessagesResponse:
        if not request.group_id:
            raise InvalidArgument("group_id is empty", field="group_id")
        page = _page(request.paging_info)
        rows = self._store.group_messages(request.group_id, page)
        return mls.QueryGroupMessagesResponse(
            messages=[wire.group_message(r) for r in rows],
            paging_info=_paging_info(page, [r.id for r in rows]),
        )

    async def GetNewestGroupMessage(
        self, request: mls.GetNewestGroupMessageRequest, context: _Context
    ) -> mls.GetNewestGroupMessageResponse:
        if len(request.group_ids) > MAX_NEWEST_GROUP_IDS:
            raise InvalidArgument(
                f"{len(request.group_ids)} group ids, above the limit of {MAX_NEWEST_GROUP_IDS}",
                field="group_ids",
            )
        response = mls.GetNewestGroupMessageResponse()
        for group_id in request.group_ids:
            entry = response.responses.add()
            row = self._store.newest_group_message(group_id) if group_id else None
            if row is not None:
                entry.group_message.CopyFrom(
                    wire.group_message(row, include_content=request.include_content)
                )
        return response

    async def SendWelcomeMessages(
        self, request: mls.SendWelcomeMessagesRequest, context: _Context
    ) -> empty_pb2.Empty:
        if not request.messages:
            raise InvalidArgument("no welcomes to send", field="messages")
        rows = [welcome_row(f"messages[{i}]", m) for i, m in enumerate(request.messages)]
        self._welcomes.publish(self._store.add_welcomes(rows, time.time_ns()))
        return empty_pb2.Empty()

    async def QueryWelcomeMessages(
        self, request: mls.QueryWelcomeMessagesRequest, context: _Context
    ) -> mls.QueryWelcomeMessagesResponse:
        if not request.installation_key:
            raise InvalidArgument("installation_key is empty", field="installation_key")
        page = _page(request.paging_info)
        rows = self._store.welcomes(request.installation_key, page)
        return mls.QueryWelcomeMessagesResponse(
            messages=[wire.welcome_message(r) for r in rows],
            paging_info=_paging_info(page, [r.id for r in rows]),
        )

    async def UploadKeyPackage(
        self, request: mls.UploadKeyPackageRequest, context: _Context
    ) -> empty_pb2.Empty:
        key_package = request.key_package.key_package_tls_serialized
        installation_key = key_package_installation("key_package", key_package)
        self._store.put_key_package(installation_key, key_package, time.time_ns())
        return empty_pb2.Empty()

    async def FetchKeyPackages(
        self, request: mls.FetchKeyPackagesRequest, context: _Context
    ) -> mls.FetchKeyPackagesResponse:
        response = mls.FetchKeyPackagesResponse()
        for key in request.installation_keys:
            # One entry per key, in order; empty for an unknown installation.
            response.key_packages.add(
                key_package_tls_serialized=self._store.key_package(key) or b""
            )
        return response

    async def BatchPublishCommitLog(
        self, request: mls.BatchPublishCommitLogRequest, context: _Context
    ) -> empty_pb2.Empty:
        _require_count(len(request.requests), MAX_COMMIT_LOG_PUBLISH, "requests")
        rows = []
        for i, entry in enumerate(request.requests):
            if not entry.group_id:
                raise InvalidArgument(f"requests[{i}].group_id is empty", field="group_id")
            wire.require_payload(
                entry.serialized_commit_log_entry, f"requests[{i}].serialized_commit_log_entry"
            )
            wire.require_payload(entry.signature, f"requests[{i}].signature")
            rows.append(
                CommitLogRow(0, entry.group_id, entry.serialized_commit_log_entry, entry.signature)
            )
        self._store.add_commit_log_entries(rows)
        return empty_pb2.Empty()

    async def BatchQueryCommitLog(
        self, request: mls.BatchQueryCommitLogRequest, context: _Context
    ) -> mls.BatchQueryCommitLogResponse:
        _require_count(len(request.requests), MAX_COMMIT_LOG_QUERIES, "requests")
        pages = []
        for i, query in enumerate(request.requests):
            if not query.group_id:
                raise InvalidArgument(f"requests[{i}].group_id is empty", field="group_id")
            if query.paging_info.direction == paging.DIRECTION_DESCENDING:
                raise InvalidArgument(
                    f"requests[{i}] asks for a descending commit log; only ascending is served",
                    field="paging_info",
                )
            pages.append(_page(query.paging_info, default_ascending=True))
        response = mls.BatchQueryCommitLogResponse()
        for query, page in zip(request.requests, pages, strict=True):
            rows = self._store.commit_log(query.group_id, page)
            response.responses.add(
                group_id=query.group_id,
                commit_log_entries=[
                    contents.CommitLogEntry(
                        sequence_id=r.id, serialized_commit_log_entry=r.entry, signature=r.signature
                    )
                    for r in rows
                ],
                paging_info=_paging_info(page, [r.id for r in rows]),
            )
        return response

    async def SubscribeGroupMessages(
        self, request: mls.SubscribeGroupMessagesRequest, context: _Context
    ) -> None:
        await self._streams.serve_group_messages(request, context)

    async def SubscribeWelcomeMessages(
        self, request: mls.SubscribeWelcomeMessagesRequest, context: _Context
    ) -> None:
        await self._streams.serve_welcomes(request, context)


def group_message_row(where: str, message: mls.GroupMessageInput) -> GroupMessageRow:
    """Validate one group message input (`where` names it in errors) and make its row."""
    field = f"{where}.v1.data"
    if not message.HasField("v1"):
        raise InvalidArgument(f"{where} has no v1", field=where)
    wire.require_payload(message.v1.data, field)
    try:
        parsed = parse_protocol_message(message.v1.data)
    except FramingError as exc:
        raise InvalidArgument(f"{field} is not an MLS protocol message: {exc}") from exc
    return GroupMessageRow(
        id=0,
        created_ns=0,
        group_id=parsed.group_id,
        data=message.v1.data,
        sender_hmac=message.v1.sender_hmac,
        should_push=message.v1.should_push,
        is_commit=parsed.is_commit,
    )


def key_package_installation(where: str, key_package: bytes) -> bytes:
    """Validate an uploaded key package (`where` names it) and return its installation key."""
    field = f"{where}.key_package_tls_serialized"
    wire.require_payload(key_package, field)
    try:
        return parse_key_package(key_package).installation_key
    except FramingError as exc:
        raise InvalidArgument(f"{field} is not an MLS KeyPackage: {exc}", field=field) from exc


def welcome_row(where: str, message: mls.WelcomeMessageInput) -> WelcomeRow:
    """Validate one welcome input (`where` names it in errors) as the reference node
    does and make its row."""
    kind = message.WhichOneof("version")
    if kind == "v1":
        v1 = message.v1
        algorithm = v1.wrapper_algorithm or _WRAP_CURVE25519
        if algorithm not in _WELCOME_WRAPPERS:
            raise InvalidArgument(f"{where} has unknown wrapper algorithm {algorithm}")
        _require_key(v1.installation_key, f"{where}.v1.installation_key")
        wire.require_payload(v1.data, f"{where}.v1.data")
        if algorithm != _WRAP_SYMMETRIC:
            wire.require_payload(v1.hpke_public_key, f"{where}.v1.hpke_public_key")
        return WelcomeRow(
            0, 0, v1.installation_key, False, v1.data, v1.hpke_public_key, algorithm,
            v1.welcome_metadata,
        )  # fmt: skip
    if kind == "welcome_pointer":
        p = message.welcome_pointer
        if p.wrapper_algorithm != _POINTER_WRAP_XWING:
            raise InvalidArgument(
                f"{where}.welcome_pointer.wrapper_algorithm must be "
                f"XWING_MLKEM_768_DRAFT_6 ({_POINTER_WRAP_XWING}), not {p.wrapper_algorithm}"
            )
        _require_key(p.installation_key, f"{where}.welcome_pointer.installation_key")
        wire.require_payload(p.welcome_pointer, f"{where}.welcome_pointer.welcome_pointer")
        wire.require_payload(p.hpke_public_key, f"{where}.welcome_pointer.hpke_public_key")
        return WelcomeRow(
            0, 0, p.installation_key, True, p.welcome_pointer, p.hpke_public_key,
            p.wrapper_algorithm, b"",
        )  # fmt: skip
    raise InvalidArgument(f"{where} is neither a welcome nor a welcome pointer")


def _require_key(key: bytes, field: str) -> None:
    if len(key) != KEY_BYTES:
        raise InvalidArgument(f"{field} has {len(key)} bytes, not {KEY_BYTES}", field=field)


def _require_count(count: int, limit: int, field: str) -> None:
    if not 1 <= count <= limit:
        raise InvalidArgument(f"{field} has {count} entries; 1 to {limit} are allowed", field=field)


def _page(info: mls.PagingInfo, *, default_ascending: bool = False) -> paging.Page:
    return paging.resolve(
        info.direction, info.limit, info.id_cursor, default_ascending=default_ascending
    )


def _paging_info(page: paging.Page, ids: list[int]) -> mls.PagingInfo:
    return mls.PagingInfo(
        direction=page.direction,
        limit=page.limit,
        id_cursor=page.next_cursor(ids),
    )
