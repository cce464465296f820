from conepb.xmtp import associations_pb2 as _associations_pb2
from conepb.xmtpv4 import envelopes_pb2 as _envelopes_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EnvelopesQuery(_message.Message):
    __slots__ = ("topics", "originator_node_ids", "last_seen")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ORIGINATOR_NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[bytes]
    originator_node_ids: _containers.RepeatedScalarFieldContainer[int]
    last_seen: _envelopes_pb2.Cursor
    def __init__(self, topics: _Optional[_Iterable[bytes]] = ..., originator_node_ids: _Optional[_Iterable[int]] = ..., last_seen: _Optional[_Union[_envelopes_pb2.Cursor, _Mapping]] = ...) -> None: ...

class SubscribeEnvelopesRequest(_message.Message):
    __slots__ = ("query",)
    QUERY_FIELD_NUMBER: _ClassVar[int]
    query: EnvelopesQuery
    def __init__(self, query: _Optional[_Union[EnvelopesQuery, _Mapping]] = ...) -> None: ...

class SubscribeEnvelopesResponse(_message.Message):
    __slots__ = ("envelopes",)
    ENVELOPES_FIELD_NUMBER: _ClassVar[int]
    envelopes: _containers.RepeatedCompositeFieldContainer[_envelopes_pb2.OriginatorEnvelope]
    def __init__(self, envelopes: _Optional[_Iterable[_Union[_envelopes_pb2.OriginatorEnvelope, _Mapping]]] = ...) -> None: ...

class SubscribeTopicsRequest(_message.Message):
    __slots__ = ("filters",)
    class TopicFilter(_message.Message):
        __slots__ = ("topic", "last_seen")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
        topic: bytes
        last_seen: _envelopes_pb2.Cursor
        def __init__(self, topic: _Optional[bytes] = ..., last_seen: _Optional[_Union[_envelopes_pb2.Cursor, _Mapping]] = ...) -> None: ...
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[SubscribeTopicsRequest.TopicFilter]
    def __init__(self, filters: _Optional[_Iterable[_Union[SubscribeTopicsRequest.TopicFilter, _Mapping]]] = ...) -> None: ...

class SubscribeTopicsResponse(_message.Message):
    __slots__ = ("envelopes", "status_update")
    class SubscriptionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SUBSCRIPTION_STATUS_UNSPECIFIED: _ClassVar[SubscribeTopicsResponse.SubscriptionStatus]
        SUBSCRIPTION_STATUS_STARTED: _ClassVar[SubscribeTopicsResponse.SubscriptionStatus]
        SUBSCRIPTION_STATUS_CATCHUP_COMPLETE: _ClassVar[SubscribeTopicsResponse.SubscriptionStatus]
        SUBSCRIPTION_STATUS_WAITING: _ClassVar[SubscribeTopicsResponse.SubscriptionStatus]
    SUBSCRIPTION_STATUS_UNSPECIFIED: SubscribeTopicsResponse.SubscriptionStatus
    SUBSCRIPTION_STATUS_STARTED: SubscribeTopicsResponse.SubscriptionStatus
    SUBSCRIPTION_STATUS_CATCHUP_COMPLETE: SubscribeTopicsResponse.SubscriptionStatus
    SUBSCRIPTION_STATUS_WAITING: SubscribeTopicsResponse.SubscriptionStatus
    class StatusUpdate(_message.Message):
        __slots__ = ("status",)
        STATUS_FIELD_NUMBER: _ClassVar[int]
        status: SubscribeTopicsResponse.SubscriptionStatus
        def __init__(self, status: _Optional[_Union[SubscribeTopicsResponse.SubscriptionStatus, str]] = ...) -> None: ...
    class Envelopes(_message.Message):
        __slots__ = ("envelopes",)
        ENVELOPES_FIELD_NUMBER: _ClassVar[int]
        envelopes: _containers.RepeatedCompositeFieldContainer[_envelopes_pb2.OriginatorEnvelope]
        def __init__(self, envelopes: _Optional[_Iterable[_Union[_envelopes_pb2.OriginatorEnvelope, _Mapping]]] = ...) -> None: ...
    ENVELOPES_FIELD_NUMBER: _ClassVar[int]
    STATUS_UPDATE_FIELD_NUMBER: _ClassVar[int]
    envelopes: SubscribeTopicsResponse.Envelopes
    status_update: SubscribeTopicsResponse.StatusUpdate
    def __init__(self, envelopes: _Optional[_Union[SubscribeTopicsResponse.Envelopes, _Mapping]] = ..., status_update: _Optional[_Union[SubscribeTopicsResponse.StatusUpdate, _Mapping]] = ...) -> None: ...

class QueryEnvelopesRequest(_message.Message):
    __slots__ = ("query", "limit")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    query: EnvelopesQuery
    limit: int
    def __init__(self, query: _Optional[_Union[EnvelopesQuery, _Mapping]] = ..., limit: _Optional[int] = ...) -> None: ...

class QueryEnvelopesResponse(_message.Message):
    __slots__ = ("envelopes",)
    ENVELOPES_FIELD_NUMBER: _ClassVar[int]
    envelopes: _containers.RepeatedCompositeFieldContainer[_envelopes_pb2.OriginatorEnvelope]
    def __init__(self, envelopes: _Optional[_Iterable[_Union[_envelopes_pb2.OriginatorEnvelope, _Mapping]]] = ...) -> None: ...

class GetNewestEnvelopeRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, topics: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetNewestEnvelopeResponse(_message.Message):
    __slots__ = ("results",)
    class Response(_message.Message):
        __slots__ = ("originator_envelope",)
        ORIGINATOR_ENVELOPE_FIELD_NUMBER: _ClassVar[int]
        originator_envelope: _envelopes_pb2.OriginatorEnvelope
        def __init__(self, originator_envelope: _Optional[_Union[_envelopes_pb2.OriginatorEnvelope, _Mapping]] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[GetNewestEnvelopeResponse.Response]
    def __init__(self, results: _Optional[_Iterable[_Union[GetNewestEnvelopeResponse.Response, _Mapping]]] = ...) -> None: ...

class GetInboxIdsRequest(_message.Message):
    __slots__ = ("requests",)
    class Request(_message.Message):
        __slots__ = ("identifier", "identifier_kind")
        IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        IDENTIFIER_KIND_FIELD_NUMBER: _ClassVar[int]
        identifier: str
        identifier_kind: _associations_pb2.IdentifierKind
        def __init__(self, identifier: _Optional[str] = ..., identifier_kind: _Optional[_Union[_associations_pb2.IdentifierKind, str]] = ...) -> None: ...
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[GetInboxIdsRequest.Request]
    def __init__(self, requests: _Optional[_Iterable[_Union[GetInboxIdsRequest.Request, _Mapping]]] = ...) -> None: ...

class GetInboxIdsResponse(_message.Message):
    __slots__ = ("responses",)
    class Response(_message.Message):
        __slots__ = ("identifier", "inbox_id", "identifier_kind")
        IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        INBOX_ID_FIELD_NUMBER: _ClassVar[int]
        IDENTIFIER_KIND_FIELD_NUMBER: _ClassVar[int]
        identifier: str
        inbox_id: str
        identifier_kind: _associations_pb2.IdentifierKind
        def __init__(self, identifier: _Optional[str] = ..., inbox_id: _Optional[str] = ..., identifier_kind: _Optional[_Union[_associations_pb2.IdentifierKind, str]] = ...) -> None: ...
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[GetInboxIdsResponse.Response]
    def __init__(self, responses: _Optional[_Iterable[_Union[GetInboxIdsResponse.Response, _Mapping]]] = ...) -> None: ...
