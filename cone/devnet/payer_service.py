"""`xmtp.xmtpv4.payer_api.PayerApi`: the D14N gateway, publishing into the one store.

A client envelope's payload is one of the V3 inputs, so each is checked by the
same rules the V3 API applies (cone/devnet/mls_service.py, identity_service.py),
and its `aad.target_topic` must be the payload's own topic. The whole request is
checked before anything is stored: a bad envelope anywhere stores nothing. Stored
rows are the V3 API's rows, marked with the devnet's node id, so V3 clients read
them too and D14N clients read them under the originators cone/devnet/topics.py
names.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cone.devnet import envelopes, topics
from cone.devnet.hub import Hub
from cone.devnet.identity_service import check_update
from cone.devnet.mls_service import group_message_row, key_package_installation, welcome_row
from cone.devnet.store import GroupMessageRow, IdentityUpdateRow, Store, WelcomeRow
from cone.errors import InvalidArgument
from conepb.xmtpv4 import envelopes_pb2 as env
from conepb.xmtpv4 import payer_api_pb2 as api
from conepb.xmtpv4 import payer_api_pb2_grpc as api_grpc

#: Stores one checked envelope's payload at a time; returns its envelope, or None
#: when the payload was stored before.
_Store = Callable[[int], env.OriginatorEnvelope | None]


class PayerService(api_grpc.PayerApiServicer):
    """The gateway over one store; `node_url` gives the URL GetNodes names."""

    def __init__(
        self,
        store: Store,
        groups: Hub[GroupMessageRow],
        welcomes: Hub[WelcomeRow],
        node_url: Callable[[], str],
    ) -> None:
        self._store = store
        self._groups = groups
        self._welcomes = welcomes
        self._node_url = node_url

    async def PublishClientEnvelopes(
        self, request: api.PublishClientEnvelopesRequest, context: Any
    ) -> api.PublishClientEnvelopesResponse:
        if not request.envelopes:
            raise InvalidArgument("no envelopes to publish", field="envelopes")
        staged = [self._check(f"envelopes[{i}]", e) for i, e in enumerate(request.envelopes)]
        response = api.PublishClientEnvelopesResponse()
        now_ns = time.time_ns()
        for store in staged:
            stored = store(now_ns)
            if stored is not None:
                response.originator_envelopes.append(stored)
        return response

    async def GetNodes(self, request: api.GetNodesRequest, context: Any) -> api.GetNodesResponse:
        return api.GetNodesResponse(nodes={topics.NODE_ID: self._node_url()})

    def _check(self, where: str, envelope: env.ClientEnvelope) -> _Store:
        """Check one envelope; returns what stores it."""
        kind = envelope.WhichOneof("payload")
        if kind == "group_message":
            row = group_message_row(f"{where}.group_message", envelope.group_message)
            depends_on = envelope.aad.depends_on.SerializeToString()
            row = replace(row, node_id=topics.NODE_ID, depends_on=depends_on)
            _require_topic(where, envelope, topics.topic(topics.KIND_GROUP_MESSAGES, row.group_id))
            return lambda now_ns: self._add_group_message(row, now_ns)
        if kind == "welcome_message":
            welcome = welcome_row(f"{where}.welcome_message", envelope.welcome_message)
            welcome = replace(welcome, node_id=topics.NODE_ID)
            key = welcome.installation_key
            _require_topic(where, envelope, topics.topic(topics.KIND_WELCOME_MESSAGES, key))
            return lambda now_ns: self._add_welcome(welcome, now_ns)
        if kind == "upload_key_package":
            key_package = envelope.upload_key_package.key_package.key_package_tls_serialized
            installation = key_package_installation(
                f"{where}.upload_key_package.key_package", key_package
            )
            _require_topic(where, envelope, topics.topic(topics.KIND_KEY_PACKAGES, installation))
            return lambda now_ns: self._put_key_package(installation, key_package, now_ns)
        if kind == "identity_update":
            raw = envelope.identity_update
            inbox_id, changes = check_update(self._store, f"{where}.identity_update", raw)
            _require_topic(where, envelope, topics.identity_topic(inbox_id))

            def append(now_ns: int) -> env.OriginatorEnvelope:
                seq = self._store.append_identity_update(inbox_id, raw, now_ns, changes)
                return envelopes.identity_update(inbox_id, IdentityUpdateRow(seq, now_ns, raw))

            return append
        if kind is None:
            raise InvalidArgument(f"{where} has no payload", field=where)
        raise InvalidArgument(
            f"{where} carries a {kind}, which nodes exchange among themselves; "
            "the devnet takes none",
            field=where,
        )

    def _add_group_message(
        self, row: GroupMessageRow, now_ns: int
    ) -> env.OriginatorEnvelope | None:
        added = self._store.add_group_messages([row], now_ns)
        self._groups.publish(added)
        return envelopes.group_message(added[0]) if added else None

    def _add_welcome(self, row: WelcomeRow, now_ns: int) -> env.OriginatorEnvelope | None:
        added = self._store.add_welcomes([row], now_ns)
        self._welcomes.publish(added)
        return envelopes.welcome(added[0]) if added else None

    def _put_key_package(
        self, installation: bytes, key_package: bytes, now_ns: int
    ) -> env.OriginatorEnvelope | None:
        self._store.put_key_package(installation, key_package, now_ns, topics.NODE_ID)
        row = self._store.key_package_row(installation)
        return None if row is None else envelopes.key_package(row)


def _require_topic(where: str, envelope: env.ClientEnvelope, expected: bytes) -> None:
    got = envelope.aad.target_topic
    if got != expected:
        field = f"{where}.aad.target_topic"
        raise InvalidArgument(
            f"{field} is {got.hex() or 'empty'}, but the payload belongs to topic "
            f"{expected.hex()} ({topics.kind_name(expected[0])})",
            field=field,
        )
