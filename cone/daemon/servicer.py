"""ConeService over gRPC: proto messages in, core calls, proto messages out.

Each RPC calls its operation's part of the core directly (`core.consents`,
`core.history`, `core.sending`, ...; cone/core/service.py lists them).

The one place in the daemon where ConeErrors become gRPC statuses. No logic lives
here beyond conversion, and the mapping of values itself is cone/daemon/convert.py.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from cone.core.model import Request
from cone.core.service import Core
from cone.daemon.convert import (
    CONSENT_OF,
    KIND,
    KIND_OF,
    NETWORK_STATES,
    add_messages,
    contact_to_pb,
    conversation_to_pb,
    members_to_pb,
    message_to_pb,
    outgoing,
    sent_fields,
    timestamp,
)
from cone.errors import ConeError, Internal
from cone.grpc_errors import to_status
from conepb.v1 import cone_pb2 as pb
from conepb.v1 import cone_pb2_grpc

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Handler = Callable[[Any, Req, grpc.aio.ServicerContext], Awaitable[Resp]]

BACKUP_CHUNK_BYTES = 1024 * 1024


def _request_to_pb(r: Request, address: str | None) -> pb.ConversationRequest:
    return pb.ConversationRequest(
        conversation_id=r.conversation_id,
        conversation_type=KIND[r.kind],
        peer_inbox_id=r.peer_inbox_id,
        peer_address=address,
        first_seen_at=timestamp(r.first_seen_ns),
        pending_messages=r.pending_messages,
    )


def _boundary(fn: Handler[Req, Resp]) -> Handler[Req, Resp]:
    """Translate errors once: ConeError → its status; anything else → INTERNAL."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        try:
            return await fn(self, request, context)
        except ConeError as err:
            await _abort(context, err)
        except Exception as exc:  # the one boundary for unexpected failures
            log.exception("internal error in %s", fn.__name__)
            await _abort(context, Internal(f"internal error in {fn.__name__}: {exc}"))
        raise AssertionError("unreachable")

    return wrapper


async def _abort(context: grpc.aio.ServicerContext, err: ConeError) -> None:
    status = to_status(err)
    await context.abort_with_status(status)


class ConeServicer(cone_pb2_grpc.ConeServiceServicer):
    """Serves ConeService for one Core."""

    def __init__(
        self,
        core: Core,
        jetstream_status: Callable[[], pb.JetStreamStatus | None] = lambda: None,
    ) -> None:
        self.core = core
        # The daemon's JetStream bridge, which the daemon wires beside the core
        # (cone/jetstream/state.py): its state for Status, None when it is off.
        self._jetstream_status = jetstream_status

    def _identity(self) -> pb.IdentityResponse:
        i = self.core.status.identity()
        return pb.IdentityResponse(
            protocol=i.protocol,
            inbox_id=i.inbox_id,
            address=i.address,
            network=i.network,
            installation_id=i.installation_id,
            backend=i.backend,
        )

    @_boundary
    async def Identity(
        self, request: pb.IdentityRequest, context: grpc.aio.ServicerContext
    ) -> pb.IdentityResponse:
        return self._identity()

    @_boundary
    async def Connect(
        self, request: pb.ConnectRequest, context: grpc.aio.ServicerContext
    ) -> pb.ConnectResponse:
        name = request.name if request.HasField("name") else None
        return pb.ConnectResponse(
            contact=contact_to_pb(await self.core.consents.connect(request.to, name))
        )

    @_boundary
    async def Send(
        self, request: pb.SendRequest, context: grpc.aio.ServicerContext
    ) -> pb.SendResponse:
        r = await self.core.sending.send(
            to=request.to,
            content=outgoing(request),
            key=request.key,
            reply_to=request.reply_to if request.HasField("reply_to") else None,
        )
        return pb.SendResponse(**sent_fields(r))

    @_boundary
    async def Reply(
        self, request: pb.ReplyRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReplyResponse:
        r = await self.core.sending.reply(
            conversation_id=request.conversation_id,
            content=outgoing(request),
            key=request.key,
            ack_consumer=request.ack_consumer,
            ack_message_ids=list(request.ack_message_ids),
        )
        return pb.ReplyResponse(**sent_fields(r), acknowledged=r.acknowledged)

    @_boundary
    async def Receive(
        self, request: pb.ReceiveRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReceiveResponse:
        messages, more = await self.core.receiving.receive(
            request.consumer,
            request.limit if request.HasField("limit") else None,
            request.wait_ms,
            list(request.exclude_conversation_ids),
        )
        response = pb.ReceiveResponse(more=more)
        add_messages(response.messages, messages)
        return response

    @_boundary
    async def Ack(
        self, request: pb.AckRequest, context: grpc.aio.ServicerContext
    ) -> pb.AckResponse:
        n = await self.core.receiving.ack(request.consumer, list(request.message_ids))
        return pb.AckResponse(acknowledged=n)

    @_boundary
    async def Requests(
        self, request: pb.RequestsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RequestsResponse:
        out = [_request_to_pb(r, address) for r, address in await self.core.consents.requests()]
        return pb.RequestsResponse(requests=out, stale=self.core.freshness.stale() or None)

    @_boundary
    async def RequestPreview(
        self, request: pb.RequestPreviewRequest, context: grpc.aio.ServicerContext
    ) -> pb.RequestPreviewResponse:
        held, address, first = await self.core.consents.request_preview(request.conversation_id)
        response = pb.RequestPreviewResponse(request=_request_to_pb(held, address))
        if first is not None:
            response.first_message.CopyFrom(message_to_pb(first))
        return response

    @_boundary
    async def Resolve(
        self, request: pb.ResolveRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResolveResponse:
        return pb.ResolveResponse(conversation_id=await self.core.history.resolve(request.to))

    @_boundary
    async def Accept(
        self, request: pb.AcceptRequest, context: grpc.aio.ServicerContext
    ) -> pb.AcceptResponse:
        await self.core.consents.accept(request.conversation_id)
        return pb.AcceptResponse(accepted=True)

    @_boundary
    async def Block(
        self, request: pb.BlockRequest, context: grpc.aio.ServicerContext
    ) -> pb.BlockResponse:
        await self.core.consents.block(request.conversation_id)
        return pb.BlockResponse(blocked=True)

    @_boundary
    async def Sync(
        self, request: pb.SyncRequest, context: grpc.aio.ServicerContext
    ) -> pb.SyncResponse:
        await self.core.intake.sync()
        return pb.SyncResponse(synced=True)

    @_boundary
    async def Attachment(
        self, request: pb.AttachmentRequest, context: grpc.aio.ServicerContext
    ) -> pb.AttachmentResponse:
        a = await self.core.history.attachment(request.message_id, request.index)
        return pb.AttachmentResponse(
            filename=a.filename,
            mime_type=a.mime_type,
            size=a.size or 0,
            sha256=a.sha256 or "",
            data=a.data or b"",
        )

    async def Backup(
        self, request: pb.BackupRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.BackupChunk]:
        try:
            async with self.core.backups.backup(request.passphrase) as (path, m):
                yield pb.BackupChunk(
                    manifest=pb.BackupManifest(
                        format_version=m.format_version,
                        inbox_id=m.inbox_id,
                        installation_id=m.installation_id,
                        created_at=timestamp(m.created_ns),
                        size_bytes=path.stat().st_size,
                        messages=m.messages,
                    )
                )
                with path.open("rb") as f:
                    while chunk := f.read(BACKUP_CHUNK_BYTES):
                        yield pb.BackupChunk(data=chunk)
        except ConeError as err:
            await _abort(context, err)
        except Exception as exc:  # the stream's one boundary, as _boundary
            log.exception("internal error in Backup")
            await _abort(context, Internal(f"internal error in Backup: {exc}"))

    @_boundary
    async def Peek(
        self, request: pb.PeekRequest, context: grpc.aio.ServicerContext
    ) -> pb.PeekResponse:
        messages, more, head = await self.core.receiving.peek(
            request.consumer,
            request.after_sequence,
            request.limit if request.HasField("limit") else None,
            request.wait_ms,
        )
        response = pb.PeekResponse(more=more, head_sequence=head)
        add_messages(response.messages, messages)
        return response

    @_boundary
    async def Status(
        self, request: pb.StatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.StatusResponse:
        s = await self.core.status.report()
        return pb.StatusResponse(
            identity=self._identity(),
            streams=[
                pb.StreamHealth(
                    name=h.name,
                    connected=h.connected,
                    last_event_at=timestamp(h.last_event_ns),
                    restarts=h.restarts,
                    last_error=h.last_error,
                )
                for h in s.streams
            ],
            last_sync_at=timestamp(s.last_sync_ns),
            last_sync_error=s.last_sync_error,
            inbox_messages=s.inbox_messages,
            consumers=[pb.ConsumerStatus(consumer=c, pending=n) for c, n in s.consumers],
            requests=s.requests,
            installations=s.installations,
            identity_updates=s.identity_updates,
            outbox=[
                pb.OutboxEntry(
                    key=o.key,
                    conversation_id=o.conversation_id,
                    state=o.state,
                    attempts=o.attempts,
                    last_error=o.last_error,
                    last_reason=o.last_reason,
                    next_attempt_at=timestamp(o.next_attempt_ns),
                )
                for o in s.outbox
            ],
            warnings=s.warnings,
            ingest_healed=s.ingest_healed,
            requests_dropped=s.requests_dropped,
            network_state=NETWORK_STATES[s.network],
            jetstream=self._jetstream_status(),
        )

    @_boundary
    async def Conversations(
        self, request: pb.ConversationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ConversationsResponse:
        consent = request.consent if request.HasField("consent") else None
        kind = request.type if request.HasField("type") else None
        views, cursor = await self.core.history.conversations(
            consumer=request.consumer,
            consent=CONSENT_OF.get(consent) if consent else None,
            kind=KIND_OF.get(kind) if kind else None,
            limit=request.limit if request.HasField("limit") else None,
            cursor=request.cursor if request.HasField("cursor") else None,
        )
        return pb.ConversationsResponse(
            conversations=[conversation_to_pb(v) for v in views],
            cursor=cursor,
            stale=self.core.freshness.stale() or None,
        )

    @_boundary
    async def Messages(
        self, request: pb.MessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.MessagesResponse:
        found, more = await self.core.history.messages(
            conversation_id=request.conversation_id,
            before=request.before if request.HasField("before") else None,
            after=request.after if request.HasField("after") else None,
            limit=request.limit if request.HasField("limit") else None,
            oldest_first=request.oldest_first if request.HasField("oldest_first") else None,
        )
        response = pb.MessagesResponse(more=more, stale=self.core.freshness.stale() or None)
        add_messages(response.messages, found)
        return response

    @_boundary
    async def Contacts(
        self, request: pb.ContactsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ContactsResponse:
        found = await self.core.history.contacts()
        return pb.ContactsResponse(contacts=[contact_to_pb(c) for c in found])

    @_boundary
    async def Unblock(
        self, request: pb.UnblockRequest, context: grpc.aio.ServicerContext
    ) -> pb.UnblockResponse:
        await self.core.consents.unblock(request.conversation_id)
        return pb.UnblockResponse(unblocked=True)

    @_boundary
    async def CreateGroup(
        self, request: pb.CreateGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateGroupResponse:
        created = await self.core.groups.create(
            members=list(request.members),
            name=request.name if request.HasField("name") else None,
            description=request.description if request.HasField("description") else None,
            image_url=request.image_url if request.HasField("image_url") else None,
            key=request.key,
        )
        return pb.CreateGroupResponse(
            group=conversation_to_pb(created.group), deduplicated=created.deduplicated
        )

    @_boundary
    async def Members(
        self, request: pb.MembersRequest, context: grpc.aio.ServicerContext
    ) -> pb.MembersResponse:
        found = await self.core.groups.members(request.conversation_id)
        return pb.MembersResponse(members=members_to_pb(found))

    @_boundary
    async def AddMembers(
        self, request: pb.AddMembersRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddMembersResponse:
        found = await self.core.groups.add(request.conversation_id, list(request.members))
        return pb.AddMembersResponse(members=members_to_pb(found))

    @_boundary
    async def RemoveMembers(
        self, request: pb.RemoveMembersRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveMembersResponse:
        found = await self.core.groups.remove(request.conversation_id, list(request.members))
        return pb.RemoveMembersResponse(members=members_to_pb(found))

    @_boundary
    async def LeaveGroup(
        self, request: pb.LeaveGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaveGroupResponse:
        await self.core.groups.leave(request.conversation_id)
        return pb.LeaveGroupResponse(left=True)

    @_boundary
    async def UpdateGroup(
        self, request: pb.UpdateGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateGroupResponse:
        view = await self.core.groups.update(
            request.conversation_id,
            name=request.name if request.HasField("name") else None,
            description=request.description if request.HasField("description") else None,
            image_url=request.image_url if request.HasField("image_url") else None,
        )
        return pb.UpdateGroupResponse(group=conversation_to_pb(view))

    @_boundary
    async def RevokeInstallations(
        self, request: pb.RevokeInstallationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeInstallationsResponse:
        revoked, left = await self.core.installations.revoke(
            list(request.installation_ids), request.all_except_this
        )
        return pb.RevokeInstallationsResponse(revoked_installation_ids=revoked, installations=left)
