"""`xmtp.identity.api.v1.IdentityApi`: per-inbox update logs and the address index.

Updates are stored as the exact bytes published and parsed separately, with a
reduced schema, for their effect on the address index (node-go's rules): a
CreateInbox or an added address associates the identifier with the inbox, a
revocation ends the newest such association, a recovery change does nothing, and
a lookup takes the newest association not revoked since.

Signatures are not verified (libxmtp verifies every update it reads). What is
checked is the structure that, if broken, would poison an inbox for every
client: an inbox is created exactly once, by the first action of its first update,
under the id its identifier and nonce derive.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any, Final

from google.protobuf.message import DecodeError

from cone.devnet import wire
from cone.devnet.store import AddressChange, Store
from cone.errors import FailedPrecondition, InvalidArgument
from conepb.xmtp import associations_pb2 as assoc
from conepb.xmtp import identity_api_pb2 as api
from conepb.xmtp import identity_api_pb2_grpc as api_grpc

#: The reference node's cap on one inbox's log.
MAX_UPDATES_PER_INBOX: Final = 256

KIND_ETHEREUM: Final = assoc.IDENTIFIER_KIND_ETHEREUM
KIND_PASSKEY: Final = assoc.IDENTIFIER_KIND_PASSKEY

_INBOX_ID: Final = re.compile(r"[0-9a-f]{64}")
_ETHEREUM_ADDRESS: Final = re.compile(r"0x[0-9a-f]{40}")

SCW_UNSUPPORTED: Final = (
    "the devnet has no Ethereum RPC and cannot verify smart-contract wallet signatures"
)


class IdentityService(api_grpc.IdentityApiServicer):
    """The identity service over one store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def PublishIdentityUpdate(
        self, request: api.PublishIdentityUpdateRequest, context: Any
    ) -> api.PublishIdentityUpdateResponse:
        raw = request.identity_update
        inbox_id, changes = check_update(self._store, "identity_update", raw)
        self._store.append_identity_update(inbox_id, raw, time.time_ns(), changes)
        return api.PublishIdentityUpdateResponse()

    async def GetIdentityUpdates(
        self, request: api.GetIdentityUpdatesRequest, context: Any
    ) -> api.GetIdentityUpdatesResponse:
        response = api.GetIdentityUpdatesResponse()
        for req in request.requests:
            entry = response.responses.add(inbox_id=req.inbox_id)
            for row in self._store.identity_updates(req.inbox_id, req.sequence_id):
                entry.updates.add(
                    sequence_id=row.sequence_id,
                    server_timestamp_ns=row.server_timestamp_ns,
                    update=row.update,
                )
        return response

    async def GetInboxIds(
        self, request: api.GetInboxIdsRequest, context: Any
    ) -> api.GetInboxIdsResponse:
        response = api.GetInboxIdsResponse()
        answer_inbox_ids(self._store, request.requests, response.responses)
        return response

    async def VerifySmartContractWalletSignatures(
        self, request: api.VerifySmartContractWalletSignaturesRequest, context: Any
    ) -> api.VerifySmartContractWalletSignaturesResponse:
        # Exactly one verdict per signature: libxmtp panics on an empty list.
        response = api.VerifySmartContractWalletSignaturesResponse()
        for _ in request.signatures:
            response.responses.add(is_valid=False, error=SCW_UNSUPPORTED)
        return response


def check_update(store: Store, field: str, raw: bytes) -> tuple[str, list[AddressChange]]:
    """Check a serialized update (`field` names it in errors) against the store:
    returns its inbox id and its address changes, or raises as the V3 API answers."""
    wire.require_payload(raw, field)
    try:
        update = assoc.IdentityUpdate.FromString(raw)
    except DecodeError as exc:
        raise InvalidArgument(f"{field} is not an IdentityUpdate: {exc}", field=field) from exc
    inbox_id = update.inbox_id
    if not _INBOX_ID.fullmatch(inbox_id):
        raise InvalidArgument(
            f"inbox_id {inbox_id!r} is not 64 lowercase hex characters", field="inbox_id"
        )
    existing = store.identity_update_count(inbox_id)
    if existing >= MAX_UPDATES_PER_INBOX:
        raise FailedPrecondition(
            f"inbox {inbox_id} already has {existing} updates, the most an inbox can have",
            reason="inbox_update_cap",
        )
    return inbox_id, _address_changes(update, creating=existing == 0)


def answer_inbox_ids(store: Store, requests: Any, responses: Any) -> None:
    """Answer GetInboxIds, V3's or D14N's (the same fields): one entry of `responses`
    a request, with the inbox the identifier belongs to now (UNSPECIFIED kind means
    ETHEREUM), its inbox_id absent, not empty, when unknown."""
    for req in requests:
        entry = responses.add(identifier=req.identifier, identifier_kind=req.identifier_kind)
        inbox_id = store.inbox_for(req.identifier_kind or KIND_ETHEREUM, req.identifier.lower())
        if inbox_id is not None:
            entry.inbox_id = inbox_id


def _address_changes(update: assoc.IdentityUpdate, *, creating: bool) -> list[AddressChange]:
    """The update's effect on the address index; raises InvalidArgument for a bad update."""
    if not update.actions:
        raise InvalidArgument("the update has no actions", field="actions")
    changes: list[AddressChange] = []
    for i, action in enumerate(update.actions):
        kind = action.WhichOneof("kind")
        if kind == "create_inbox":
            if not creating or i != 0:
                raise InvalidArgument(
                    f"actions[{i}] creates inbox {update.inbox_id}, which "
                    + ("already exists" if not creating else "must be the first action"),
                    field="actions",
                )
            create = action.create_inbox
            derived = hashlib.sha256(
                f"{create.initial_identifier}{create.nonce}".encode()
            ).hexdigest()
            if derived != update.inbox_id:
                raise InvalidArgument(
                    f"inbox id {update.inbox_id} is not the one {create.initial_identifier!r} "
                    f"and nonce {create.nonce} derive ({derived})",
                    field="inbox_id",
                )
            ident_kind = create.initial_identifier_kind or KIND_ETHEREUM
            changes.append(
                AddressChange(ident_kind, _identifier(ident_kind, create.initial_identifier), False)
            )
        elif i == 0 and creating:
            raise InvalidArgument(
                f"inbox {update.inbox_id} does not exist: its first update must create it",
                field="actions",
            )
        elif kind == "add":
            change = _member(action.add.new_member_identifier, revoke=False)
            if change is not None:
                changes.append(change)
        elif kind == "revoke":
            change = _member(action.revoke.member_to_revoke, revoke=True)
            if change is not None:
                changes.append(change)
        elif kind != "change_recovery_address":
            raise InvalidArgument(f"actions[{i}] is not an action the node knows", field="actions")
    return changes


def _member(member: assoc.MemberIdentifier, *, revoke: bool) -> AddressChange | None:
    """The index entry of a member; None for installations, which are not indexed."""
    kind = member.WhichOneof("kind")
    if kind == "ethereum_address":
        return AddressChange(
            KIND_ETHEREUM, _identifier(KIND_ETHEREUM, member.ethereum_address), revoke
        )
    if kind == "passkey":
        return AddressChange(KIND_PASSKEY, member.passkey.key.hex(), revoke)
    if kind == "installation_public_key":
        return None
    raise InvalidArgument("a member identifier has no kind", field="actions")


def _identifier(kind: int, identifier: str) -> str:
    normal = identifier.lower()
    if kind == KIND_ETHEREUM and not _ETHEREUM_ADDRESS.fullmatch(normal):
        raise InvalidArgument(
            f"{identifier!r} is not an Ethereum address (0x and 40 hex characters)",
            field="actions",
        )
    if kind not in (KIND_ETHEREUM, KIND_PASSKEY):
        raise InvalidArgument(f"unknown identifier kind {kind}", field="actions")
    if not normal:
        raise InvalidArgument("an identifier is empty", field="actions")
    return normal
