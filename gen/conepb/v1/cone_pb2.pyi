import datetime

from buf.validate import validate_pb2 as _validate_pb2
from conepb.v1 import options_pb2 as _options_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConversationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONVERSATION_TYPE_UNSPECIFIED: _ClassVar[ConversationType]
    CONVERSATION_TYPE_DM: _ClassVar[ConversationType]
    CONVERSATION_TYPE_GROUP: _ClassVar[ConversationType]

class ConsentState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSENT_STATE_UNSPECIFIED: _ClassVar[ConsentState]
    CONSENT_STATE_REQUESTED: _ClassVar[ConsentState]
    CONSENT_STATE_ACCEPTED: _ClassVar[ConsentState]
    CONSENT_STATE_BLOCKED: _ClassVar[ConsentState]

class ReactionAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REACTION_ACTION_UNSPECIFIED: _ClassVar[ReactionAction]
    REACTION_ACTION_ADDED: _ClassVar[ReactionAction]
    REACTION_ACTION_REMOVED: _ClassVar[ReactionAction]

class ReactionSchema(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REACTION_SCHEMA_UNSPECIFIED: _ClassVar[ReactionSchema]
    REACTION_SCHEMA_UNICODE: _ClassVar[ReactionSchema]
    REACTION_SCHEMA_SHORTCODE: _ClassVar[ReactionSchema]
    REACTION_SCHEMA_CUSTOM: _ClassVar[ReactionSchema]

class NetworkState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NETWORK_STATE_UNSPECIFIED: _ClassVar[NetworkState]
    NETWORK_STATE_REACHABLE: _ClassVar[NetworkState]
    NETWORK_STATE_UNREACHABLE: _ClassVar[NetworkState]
    NETWORK_STATE_V3_CUTOVER: _ClassVar[NetworkState]
    NETWORK_STATE_IDENTITY_UNKNOWN: _ClassVar[NetworkState]

class MemberRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMBER_ROLE_UNSPECIFIED: _ClassVar[MemberRole]
    MEMBER_ROLE_MEMBER: _ClassVar[MemberRole]
    MEMBER_ROLE_ADMIN: _ClassVar[MemberRole]
    MEMBER_ROLE_SUPER_ADMIN: _ClassVar[MemberRole]
CONVERSATION_TYPE_UNSPECIFIED: ConversationType
CONVERSATION_TYPE_DM: ConversationType
CONVERSATION_TYPE_GROUP: ConversationType
CONSENT_STATE_UNSPECIFIED: ConsentState
CONSENT_STATE_REQUESTED: ConsentState
CONSENT_STATE_ACCEPTED: ConsentState
CONSENT_STATE_BLOCKED: ConsentState
REACTION_ACTION_UNSPECIFIED: ReactionAction
REACTION_ACTION_ADDED: ReactionAction
REACTION_ACTION_REMOVED: ReactionAction
REACTION_SCHEMA_UNSPECIFIED: ReactionSchema
REACTION_SCHEMA_UNICODE: ReactionSchema
REACTION_SCHEMA_SHORTCODE: ReactionSchema
REACTION_SCHEMA_CUSTOM: ReactionSchema
NETWORK_STATE_UNSPECIFIED: NetworkState
NETWORK_STATE_REACHABLE: NetworkState
NETWORK_STATE_UNREACHABLE: NetworkState
NETWORK_STATE_V3_CUTOVER: NetworkState
NETWORK_STATE_IDENTITY_UNKNOWN: NetworkState
MEMBER_ROLE_UNSPECIFIED: MemberRole
MEMBER_ROLE_MEMBER: MemberRole
MEMBER_ROLE_ADMIN: MemberRole
MEMBER_ROLE_SUPER_ADMIN: MemberRole

class Reaction(_message.Message):
    __slots__ = ("message_id", "emoji", "action", "schema", "reference_inbox_id")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    EMOJI_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    emoji: str
    action: ReactionAction
    schema: ReactionSchema
    reference_inbox_id: str
    def __init__(self, message_id: _Optional[str] = ..., emoji: _Optional[str] = ..., action: _Optional[_Union[ReactionAction, str]] = ..., schema: _Optional[_Union[ReactionSchema, str]] = ..., reference_inbox_id: _Optional[str] = ...) -> None: ...

class OutgoingAttachment(_message.Message):
    __slots__ = ("filename", "mime_type", "data")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    filename: str
    mime_type: str
    data: bytes
    def __init__(self, filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class Attachment(_message.Message):
    __slots__ = ("filename", "mime_type", "size", "sha256", "data", "error")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    filename: str
    mime_type: str
    size: int
    sha256: str
    data: bytes
    error: str
    def __init__(self, filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ..., data: _Optional[bytes] = ..., error: _Optional[str] = ...) -> None: ...

class IdentityRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IdentityResponse(_message.Message):
    __slots__ = ("protocol", "inbox_id", "address", "network", "installation_id", "backend")
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    INSTALLATION_ID_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    protocol: int
    inbox_id: str
    address: str
    network: str
    installation_id: str
    backend: str
    def __init__(self, protocol: _Optional[int] = ..., inbox_id: _Optional[str] = ..., address: _Optional[str] = ..., network: _Optional[str] = ..., installation_id: _Optional[str] = ..., backend: _Optional[str] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ("to", "name")
    TO_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    to: str
    name: str
    def __init__(self, to: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Contact(_message.Message):
    __slots__ = ("name", "inbox_id", "address", "conversation_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    inbox_id: str
    address: str
    conversation_id: str
    def __init__(self, name: _Optional[str] = ..., inbox_id: _Optional[str] = ..., address: _Optional[str] = ..., conversation_id: _Optional[str] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("contact",)
    CONTACT_FIELD_NUMBER: _ClassVar[int]
    contact: Contact
    def __init__(self, contact: _Optional[_Union[Contact, _Mapping]] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ("to", "text", "data_json", "markdown", "reaction", "attachment", "key", "reply_to")
    TO_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    MARKDOWN_FIELD_NUMBER: _ClassVar[int]
    REACTION_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    to: str
    text: str
    data_json: str
    markdown: str
    reaction: Reaction
    attachment: OutgoingAttachment
    key: str
    reply_to: str
    def __init__(self, to: _Optional[str] = ..., text: _Optional[str] = ..., data_json: _Optional[str] = ..., markdown: _Optional[str] = ..., reaction: _Optional[_Union[Reaction, _Mapping]] = ..., attachment: _Optional[_Union[OutgoingAttachment, _Mapping]] = ..., key: _Optional[str] = ..., reply_to: _Optional[str] = ...) -> None: ...

class SendResponse(_message.Message):
    __slots__ = ("message_id", "conversation_id", "deduplicated", "published", "retry_after_ms")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    conversation_id: str
    deduplicated: bool
    published: bool
    retry_after_ms: int
    def __init__(self, message_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., deduplicated: _Optional[bool] = ..., published: _Optional[bool] = ..., retry_after_ms: _Optional[int] = ...) -> None: ...

class ReplyRequest(_message.Message):
    __slots__ = ("conversation_id", "text", "key", "markdown", "reaction", "attachment", "data_json", "ack_message_ids", "ack_consumer")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MARKDOWN_FIELD_NUMBER: _ClassVar[int]
    REACTION_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENT_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    ACK_MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    ACK_CONSUMER_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    text: str
    key: str
    markdown: str
    reaction: Reaction
    attachment: OutgoingAttachment
    data_json: str
    ack_message_ids: _containers.RepeatedScalarFieldContainer[str]
    ack_consumer: str
    def __init__(self, conversation_id: _Optional[str] = ..., text: _Optional[str] = ..., key: _Optional[str] = ..., markdown: _Optional[str] = ..., reaction: _Optional[_Union[Reaction, _Mapping]] = ..., attachment: _Optional[_Union[OutgoingAttachment, _Mapping]] = ..., data_json: _Optional[str] = ..., ack_message_ids: _Optional[_Iterable[str]] = ..., ack_consumer: _Optional[str] = ...) -> None: ...

class ReplyResponse(_message.Message):
    __slots__ = ("message_id", "conversation_id", "deduplicated", "published", "retry_after_ms", "acknowledged")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    conversation_id: str
    deduplicated: bool
    published: bool
    retry_after_ms: int
    acknowledged: int
    def __init__(self, message_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., deduplicated: _Optional[bool] = ..., published: _Optional[bool] = ..., retry_after_ms: _Optional[int] = ..., acknowledged: _Optional[int] = ...) -> None: ...

class ReceiveRequest(_message.Message):
    __slots__ = ("consumer", "limit", "wait_ms", "exclude_conversation_ids")
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_CONVERSATION_IDS_FIELD_NUMBER: _ClassVar[int]
    consumer: str
    limit: int
    wait_ms: int
    exclude_conversation_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, consumer: _Optional[str] = ..., limit: _Optional[int] = ..., wait_ms: _Optional[int] = ..., exclude_conversation_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("message_id", "conversation_id", "conversation_type", "sender_inbox_id", "sent_at", "content_type", "text", "data_json", "reply_to", "fallback", "sequence", "deliveries", "unreadable", "reaction", "attachment", "attachments", "content_json", "own", "deleted", "expired")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    SENDER_INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    UNREADABLE_FIELD_NUMBER: _ClassVar[int]
    REACTION_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENT_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    OWN_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    conversation_id: str
    conversation_type: ConversationType
    sender_inbox_id: str
    sent_at: _timestamp_pb2.Timestamp
    content_type: str
    text: str
    data_json: str
    reply_to: str
    fallback: str
    sequence: int
    deliveries: int
    unreadable: str
    reaction: Reaction
    attachment: Attachment
    attachments: _containers.RepeatedCompositeFieldContainer[Attachment]
    content_json: str
    own: bool
    deleted: bool
    expired: bool
    def __init__(self, message_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., conversation_type: _Optional[_Union[ConversationType, str]] = ..., sender_inbox_id: _Optional[str] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., content_type: _Optional[str] = ..., text: _Optional[str] = ..., data_json: _Optional[str] = ..., reply_to: _Optional[str] = ..., fallback: _Optional[str] = ..., sequence: _Optional[int] = ..., deliveries: _Optional[int] = ..., unreadable: _Optional[str] = ..., reaction: _Optional[_Union[Reaction, _Mapping]] = ..., attachment: _Optional[_Union[Attachment, _Mapping]] = ..., attachments: _Optional[_Iterable[_Union[Attachment, _Mapping]]] = ..., content_json: _Optional[str] = ..., own: _Optional[bool] = ..., deleted: _Optional[bool] = ..., expired: _Optional[bool] = ...) -> None: ...

class ReceiveResponse(_message.Message):
    __slots__ = ("messages", "more")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    more: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., more: _Optional[bool] = ...) -> None: ...

class AckRequest(_message.Message):
    __slots__ = ("message_ids", "consumer")
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    message_ids: _containers.RepeatedScalarFieldContainer[str]
    consumer: str
    def __init__(self, message_ids: _Optional[_Iterable[str]] = ..., consumer: _Optional[str] = ...) -> None: ...

class AckResponse(_message.Message):
    __slots__ = ("acknowledged",)
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    acknowledged: int
    def __init__(self, acknowledged: _Optional[int] = ...) -> None: ...

class RequestsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConversationRequest(_message.Message):
    __slots__ = ("conversation_id", "conversation_type", "peer_inbox_id", "peer_address", "first_seen_at", "pending_messages")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    PEER_INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_AT_FIELD_NUMBER: _ClassVar[int]
    PENDING_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    conversation_type: ConversationType
    peer_inbox_id: str
    peer_address: str
    first_seen_at: _timestamp_pb2.Timestamp
    pending_messages: int
    def __init__(self, conversation_id: _Optional[str] = ..., conversation_type: _Optional[_Union[ConversationType, str]] = ..., peer_inbox_id: _Optional[str] = ..., peer_address: _Optional[str] = ..., first_seen_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending_messages: _Optional[int] = ...) -> None: ...

class RequestsResponse(_message.Message):
    __slots__ = ("requests", "stale")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[ConversationRequest]
    stale: bool
    def __init__(self, requests: _Optional[_Iterable[_Union[ConversationRequest, _Mapping]]] = ..., stale: _Optional[bool] = ...) -> None: ...

class AcceptRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class AcceptResponse(_message.Message):
    __slots__ = ("accepted",)
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    def __init__(self, accepted: _Optional[bool] = ...) -> None: ...

class BlockRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class BlockResponse(_message.Message):
    __slots__ = ("blocked",)
    BLOCKED_FIELD_NUMBER: _ClassVar[int]
    blocked: bool
    def __init__(self, blocked: _Optional[bool] = ...) -> None: ...

class SyncRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SyncResponse(_message.Message):
    __slots__ = ("synced",)
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    synced: bool
    def __init__(self, synced: _Optional[bool] = ...) -> None: ...

class AttachmentRequest(_message.Message):
    __slots__ = ("message_id", "index")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    index: int
    def __init__(self, message_id: _Optional[str] = ..., index: _Optional[int] = ...) -> None: ...

class AttachmentResponse(_message.Message):
    __slots__ = ("filename", "mime_type", "size", "sha256", "data")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    filename: str
    mime_type: str
    size: int
    sha256: str
    data: bytes
    def __init__(self, filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StreamHealth(_message.Message):
    __slots__ = ("name", "connected", "last_event_at", "restarts", "last_error")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_AT_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    connected: bool
    last_event_at: _timestamp_pb2.Timestamp
    restarts: int
    last_error: str
    def __init__(self, name: _Optional[str] = ..., connected: _Optional[bool] = ..., last_event_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., restarts: _Optional[int] = ..., last_error: _Optional[str] = ...) -> None: ...

class ConsumerStatus(_message.Message):
    __slots__ = ("consumer", "pending")
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    consumer: str
    pending: int
    def __init__(self, consumer: _Optional[str] = ..., pending: _Optional[int] = ...) -> None: ...

class OutboxEntry(_message.Message):
    __slots__ = ("key", "conversation_id", "state", "attempts", "last_error", "next_attempt_at", "last_reason")
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_REASON_FIELD_NUMBER: _ClassVar[int]
    key: str
    conversation_id: str
    state: str
    attempts: int
    last_error: str
    next_attempt_at: _timestamp_pb2.Timestamp
    last_reason: str
    def __init__(self, key: _Optional[str] = ..., conversation_id: _Optional[str] = ..., state: _Optional[str] = ..., attempts: _Optional[int] = ..., last_error: _Optional[str] = ..., next_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_reason: _Optional[str] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("identity", "streams", "last_sync_at", "last_sync_error", "inbox_messages", "consumers", "requests", "outbox", "installations", "identity_updates", "warnings", "ingest_healed", "network_state", "requests_dropped", "jetstream")
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    LAST_SYNC_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SYNC_ERROR_FIELD_NUMBER: _ClassVar[int]
    INBOX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_FIELD_NUMBER: _ClassVar[int]
    INSTALLATIONS_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_UPDATES_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    INGEST_HEALED_FIELD_NUMBER: _ClassVar[int]
    NETWORK_STATE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    JETSTREAM_FIELD_NUMBER: _ClassVar[int]
    identity: IdentityResponse
    streams: _containers.RepeatedCompositeFieldContainer[StreamHealth]
    last_sync_at: _timestamp_pb2.Timestamp
    last_sync_error: str
    inbox_messages: int
    consumers: _containers.RepeatedCompositeFieldContainer[ConsumerStatus]
    requests: int
    outbox: _containers.RepeatedCompositeFieldContainer[OutboxEntry]
    installations: int
    identity_updates: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    ingest_healed: int
    network_state: NetworkState
    requests_dropped: int
    jetstream: JetStreamStatus
    def __init__(self, identity: _Optional[_Union[IdentityResponse, _Mapping]] = ..., streams: _Optional[_Iterable[_Union[StreamHealth, _Mapping]]] = ..., last_sync_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_sync_error: _Optional[str] = ..., inbox_messages: _Optional[int] = ..., consumers: _Optional[_Iterable[_Union[ConsumerStatus, _Mapping]]] = ..., requests: _Optional[int] = ..., outbox: _Optional[_Iterable[_Union[OutboxEntry, _Mapping]]] = ..., installations: _Optional[int] = ..., identity_updates: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ..., ingest_healed: _Optional[int] = ..., network_state: _Optional[_Union[NetworkState, str]] = ..., requests_dropped: _Optional[int] = ..., jetstream: _Optional[_Union[JetStreamStatus, _Mapping]] = ...) -> None: ...

class JetStreamStatus(_message.Message):
    __slots__ = ("servers", "reachable", "consumer", "error")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    servers: str
    reachable: bool
    consumer: str
    error: str
    def __init__(self, servers: _Optional[str] = ..., reachable: _Optional[bool] = ..., consumer: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ("passphrase",)
    PASSPHRASE_FIELD_NUMBER: _ClassVar[int]
    passphrase: str
    def __init__(self, passphrase: _Optional[str] = ...) -> None: ...

class BackupManifest(_message.Message):
    __slots__ = ("format_version", "inbox_id", "installation_id", "created_at", "size_bytes", "messages")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    INSTALLATION_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    inbox_id: str
    installation_id: str
    created_at: _timestamp_pb2.Timestamp
    size_bytes: int
    messages: int
    def __init__(self, format_version: _Optional[int] = ..., inbox_id: _Optional[str] = ..., installation_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., size_bytes: _Optional[int] = ..., messages: _Optional[int] = ...) -> None: ...

class BackupChunk(_message.Message):
    __slots__ = ("manifest", "data")
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    manifest: BackupManifest
    data: bytes
    def __init__(self, manifest: _Optional[_Union[BackupManifest, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class PeekRequest(_message.Message):
    __slots__ = ("after_sequence", "consumer", "limit", "wait_ms")
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    consumer: str
    limit: int
    wait_ms: int
    def __init__(self, after_sequence: _Optional[int] = ..., consumer: _Optional[str] = ..., limit: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class PeekResponse(_message.Message):
    __slots__ = ("messages", "more", "head_sequence")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    HEAD_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    more: bool
    head_sequence: int
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., more: _Optional[bool] = ..., head_sequence: _Optional[int] = ...) -> None: ...

class ConversationsRequest(_message.Message):
    __slots__ = ("consent", "type", "limit", "cursor", "consumer")
    CONSENT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    consent: ConsentState
    type: ConversationType
    limit: int
    cursor: str
    consumer: str
    def __init__(self, consent: _Optional[_Union[ConsentState, str]] = ..., type: _Optional[_Union[ConversationType, str]] = ..., limit: _Optional[int] = ..., cursor: _Optional[str] = ..., consumer: _Optional[str] = ...) -> None: ...

class ConversationSummary(_message.Message):
    __slots__ = ("conversation_id", "conversation_type", "consent", "peer_inbox_id", "peer_address", "contact_name", "name", "description", "image_url", "member_count", "created_at", "last_message_at", "pending_messages", "active")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONSENT_FIELD_NUMBER: _ClassVar[int]
    PEER_INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONTACT_NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    IMAGE_URL_FIELD_NUMBER: _ClassVar[int]
    MEMBER_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_AT_FIELD_NUMBER: _ClassVar[int]
    PENDING_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    conversation_type: ConversationType
    consent: ConsentState
    peer_inbox_id: str
    peer_address: str
    contact_name: str
    name: str
    description: str
    image_url: str
    member_count: int
    created_at: _timestamp_pb2.Timestamp
    last_message_at: _timestamp_pb2.Timestamp
    pending_messages: int
    active: bool
    def __init__(self, conversation_id: _Optional[str] = ..., conversation_type: _Optional[_Union[ConversationType, str]] = ..., consent: _Optional[_Union[ConsentState, str]] = ..., peer_inbox_id: _Optional[str] = ..., peer_address: _Optional[str] = ..., contact_name: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., image_url: _Optional[str] = ..., member_count: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_message_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending_messages: _Optional[int] = ..., active: _Optional[bool] = ...) -> None: ...

class ConversationsResponse(_message.Message):
    __slots__ = ("conversations", "cursor", "stale")
    CONVERSATIONS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    conversations: _containers.RepeatedCompositeFieldContainer[ConversationSummary]
    cursor: str
    stale: bool
    def __init__(self, conversations: _Optional[_Iterable[_Union[ConversationSummary, _Mapping]]] = ..., cursor: _Optional[str] = ..., stale: _Optional[bool] = ...) -> None: ...

class MessagesRequest(_message.Message):
    __slots__ = ("conversation_id", "before", "after", "limit", "oldest_first")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OLDEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    before: str
    after: str
    limit: int
    oldest_first: bool
    def __init__(self, conversation_id: _Optional[str] = ..., before: _Optional[str] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ..., oldest_first: _Optional[bool] = ...) -> None: ...

class MessagesResponse(_message.Message):
    __slots__ = ("messages", "more", "stale")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    more: bool
    stale: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., more: _Optional[bool] = ..., stale: _Optional[bool] = ...) -> None: ...

class ContactsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ContactsResponse(_message.Message):
    __slots__ = ("contacts",)
    CONTACTS_FIELD_NUMBER: _ClassVar[int]
    contacts: _containers.RepeatedCompositeFieldContainer[Contact]
    def __init__(self, contacts: _Optional[_Iterable[_Union[Contact, _Mapping]]] = ...) -> None: ...

class UnblockRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class UnblockResponse(_message.Message):
    __slots__ = ("unblocked",)
    UNBLOCKED_FIELD_NUMBER: _ClassVar[int]
    unblocked: bool
    def __init__(self, unblocked: _Optional[bool] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("inbox_id", "addresses", "role")
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    inbox_id: str
    addresses: _containers.RepeatedScalarFieldContainer[str]
    role: MemberRole
    def __init__(self, inbox_id: _Optional[str] = ..., addresses: _Optional[_Iterable[str]] = ..., role: _Optional[_Union[MemberRole, str]] = ...) -> None: ...

class CreateGroupRequest(_message.Message):
    __slots__ = ("members", "name", "description", "image_url", "key")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    IMAGE_URL_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedScalarFieldContainer[str]
    name: str
    description: str
    image_url: str
    key: str
    def __init__(self, members: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., image_url: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class CreateGroupResponse(_message.Message):
    __slots__ = ("group", "deduplicated")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    group: ConversationSummary
    deduplicated: bool
    def __init__(self, group: _Optional[_Union[ConversationSummary, _Mapping]] = ..., deduplicated: _Optional[bool] = ...) -> None: ...

class MembersRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class MembersResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class AddMembersRequest(_message.Message):
    __slots__ = ("conversation_id", "members")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    members: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, conversation_id: _Optional[str] = ..., members: _Optional[_Iterable[str]] = ...) -> None: ...

class AddMembersResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class RemoveMembersRequest(_message.Message):
    __slots__ = ("conversation_id", "members")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    members: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, conversation_id: _Optional[str] = ..., members: _Optional[_Iterable[str]] = ...) -> None: ...

class RemoveMembersResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class LeaveGroupRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class LeaveGroupResponse(_message.Message):
    __slots__ = ("left",)
    LEFT_FIELD_NUMBER: _ClassVar[int]
    left: bool
    def __init__(self, left: _Optional[bool] = ...) -> None: ...

class UpdateGroupRequest(_message.Message):
    __slots__ = ("conversation_id", "name", "description", "image_url")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    IMAGE_URL_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    name: str
    description: str
    image_url: str
    def __init__(self, conversation_id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., image_url: _Optional[str] = ...) -> None: ...

class UpdateGroupResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: ConversationSummary
    def __init__(self, group: _Optional[_Union[ConversationSummary, _Mapping]] = ...) -> None: ...

class RevokeInstallationsRequest(_message.Message):
    __slots__ = ("installation_ids", "all_except_this")
    INSTALLATION_IDS_FIELD_NUMBER: _ClassVar[int]
    ALL_EXCEPT_THIS_FIELD_NUMBER: _ClassVar[int]
    installation_ids: _containers.RepeatedScalarFieldContainer[str]
    all_except_this: bool
    def __init__(self, installation_ids: _Optional[_Iterable[str]] = ..., all_except_this: _Optional[bool] = ...) -> None: ...

class RevokeInstallationsResponse(_message.Message):
    __slots__ = ("revoked_installation_ids", "installations")
    REVOKED_INSTALLATION_IDS_FIELD_NUMBER: _ClassVar[int]
    INSTALLATIONS_FIELD_NUMBER: _ClassVar[int]
    revoked_installation_ids: _containers.RepeatedScalarFieldContainer[str]
    installations: int
    def __init__(self, revoked_installation_ids: _Optional[_Iterable[str]] = ..., installations: _Optional[int] = ...) -> None: ...

class RequestPreviewRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class RequestPreviewResponse(_message.Message):
    __slots__ = ("request", "first_message")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    FIRST_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    request: ConversationRequest
    first_message: Message
    def __init__(self, request: _Optional[_Union[ConversationRequest, _Mapping]] = ..., first_message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class ResolveRequest(_message.Message):
    __slots__ = ("to",)
    TO_FIELD_NUMBER: _ClassVar[int]
    to: str
    def __init__(self, to: _Optional[str] = ...) -> None: ...

class ResolveResponse(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...
