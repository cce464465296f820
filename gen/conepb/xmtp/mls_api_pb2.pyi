from conepb.xmtp import message_contents_pb2 as _message_contents_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SortDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SORT_DIRECTION_UNSPECIFIED: _ClassVar[SortDirection]
    SORT_DIRECTION_ASCENDING: _ClassVar[SortDirection]
    SORT_DIRECTION_DESCENDING: _ClassVar[SortDirection]
SORT_DIRECTION_UNSPECIFIED: SortDirection
SORT_DIRECTION_ASCENDING: SortDirection
SORT_DIRECTION_DESCENDING: SortDirection

class GroupMessage(_message.Message):
    __slots__ = ("v1",)
    class V1(_message.Message):
        __slots__ = ("id", "created_ns", "group_id", "data", "sender_hmac", "should_push", "is_commit")
        ID_FIELD_NUMBER: _ClassVar[int]
        CREATED_NS_FIELD_NUMBER: _ClassVar[int]
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NUMBER: _ClassVar[int]
        SENDER_HMAC_FIELD_NUMBER: _ClassVar[int]
        SHOULD_PUSH_FIELD_NUMBER: _ClassVar[int]
        IS_COMMIT_FIELD_NUMBER: _ClassVar[int]
        id: int
        created_ns: int
        group_id: bytes
        data: bytes
        sender_hmac: bytes
        should_push: bool
        is_commit: bool
        def __init__(self, id: _Optional[int] = ..., created_ns: _Optional[int] = ..., group_id: _Optional[bytes] = ..., data: _Optional[bytes] = ..., sender_hmac: _Optional[bytes] = ..., should_push: _Optional[bool] = ..., is_commit: _Optional[bool] = ...) -> None: ...
    V1_FIELD_NUMBER: _ClassVar[int]
    v1: GroupMessage.V1
    def __init__(self, v1: _Optional[_Union[GroupMessage.V1, _Mapping]] = ...) -> None: ...

class GroupMessageInput(_message.Message):
    __slots__ = ("v1",)
    class V1(_message.Message):
        __slots__ = ("data", "sender_hmac", "should_push")
        DATA_FIELD_NUMBER: _ClassVar[int]
        SENDER_HMAC_FIELD_NUMBER: _ClassVar[int]
        SHOULD_PUSH_FIELD_NUMBER: _ClassVar[int]
        data: bytes
        sender_hmac: bytes
        should_push: bool
        def __init__(self, data: _Optional[bytes] = ..., sender_hmac: _Optional[bytes] = ..., should_push: _Optional[bool] = ...) -> None: ...
    V1_FIELD_NUMBER: _ClassVar[int]
    v1: GroupMessageInput.V1
    def __init__(self, v1: _Optional[_Union[GroupMessageInput.V1, _Mapping]] = ...) -> None: ...

class WelcomeMessage(_message.Message):
    __slots__ = ("v1", "welcome_pointer")
    class V1(_message.Message):
        __slots__ = ("id", "created_ns", "installation_key", "data", "hpke_public_key", "wrapper_algorithm", "welcome_metadata")
        ID_FIELD_NUMBER: _ClassVar[int]
        CREATED_NS_FIELD_NUMBER: _ClassVar[int]
        INSTALLATION_KEY_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NUMBER: _ClassVar[int]
        HPKE_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
        WRAPPER_ALGORITHM_FIELD_NUMBER: _ClassVar[int]
        WELCOME_METADATA_FIELD_NUMBER: _ClassVar[int]
        id: int
        created_ns: int
        installation_key: bytes
        data: bytes
        hpke_public_key: bytes
        wrapper_algorithm: _message_contents_pb2.WelcomeWrapperAlgorithm
        welcome_metadata: bytes
        def __init__(self, id: _Optional[int] = ..., created_ns: _Optional[int] = ..., installation_key: _Optional[bytes] = ..., data: _Optional[bytes] = ..., hpke_public_key: _Optional[bytes] = ..., wrapper_algorithm: _Optional[_Union[_message_contents_pb2.WelcomeWrapperAlgorithm, str]] = ..., welcome_metadata: _Optional[bytes] = ...) -> None: ...
    class WelcomePointer(_message.Message):
        __slots__ = ("id", "created_ns", "installation_key", "welcome_pointer", "hpke_public_key", "wrapper_algorithm")
        ID_FIELD_NUMBER: _ClassVar[int]
        CREATED_NS_FIELD_NUMBER: _ClassVar[int]
        INSTALLATION_KEY_FIELD_NUMBER: _ClassVar[int]
        WELCOME_POINTER_FIELD_NUMBER: _ClassVar[int]
        HPKE_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
        WRAPPER_ALGORITHM_FIELD_NUMBER: _ClassVar[int]
        id: int
        created_ns: int
        installation_key: bytes
        welcome_pointer: bytes
        hpke_public_key: bytes
        wrapper_algorithm: _message_contents_pb2.WelcomePointerWrapperAlgorithm
        def __init__(self, id: _Optional[int] = ..., created_ns: _Optional[int] = ..., installation_key: _Optional[bytes] = ..., welcome_pointer: _Optional[bytes] = ..., hpke_public_key: _Optional[bytes] = ..., wrapper_algorithm: _Optional[_Union[_message_contents_pb2.WelcomePointerWrapperAlgorithm, str]] = ...) -> None: ...
    V1_FIELD_NUMBER: _ClassVar[int]
    WELCOME_POINTER_FIELD_NUMBER: _ClassVar[int]
    v1: WelcomeMessage.V1
    welcome_pointer: WelcomeMessage.WelcomePointer
    def __init__(self, v1: _Optional[_Union[WelcomeMessage.V1, _Mapping]] = ..., welcome_pointer: _Optional[_Union[WelcomeMessage.WelcomePointer, _Mapping]] = ...) -> None: ...

class WelcomeMessageInput(_message.Message):
    __slots__ = ("v1", "welcome_pointer")
    class V1(_message.Message):
        __slots__ = ("installation_key", "data", "hpke_public_key", "wrapper_algorithm", "welcome_metadata")
        INSTALLATION_KEY_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NUMBER: _ClassVar[int]
        HPKE_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
        WRAPPER_ALGORITHM_FIELD_NUMBER: _ClassVar[int]
        WELCOME_METADATA_FIELD_NUMBER: _ClassVar[int]
        installation_key: bytes
        data: bytes
        hpke_public_key: bytes
        wrapper_algorithm: _message_contents_pb2.WelcomeWrapperAlgorithm
        welcome_metadata: bytes
        def __init__(self, installation_key: _Optional[bytes] = ..., data: _Optional[bytes] = ..., hpke_public_key: _Optional[bytes] = ..., wrapper_algorithm: _Optional[_Union[_message_contents_pb2.WelcomeWrapperAlgorithm, str]] = ..., welcome_metadata: _Optional[bytes] = ...) -> None: ...
    class WelcomePointer(_message.Message):
        __slots__ = ("installation_key", "welcome_pointer", "hpke_public_key", "wrapper_algorithm")
        INSTALLATION_KEY_FIELD_NUMBER: _ClassVar[int]
        WELCOME_POINTER_FIELD_NUMBER: _ClassVar[int]
        HPKE_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
        WRAPPER_ALGORITHM_FIELD_NUMBER: _ClassVar[int]
        installation_key: bytes
        welcome_pointer: bytes
        hpke_public_key: bytes
        wrapper_algorithm: _message_contents_pb2.WelcomePointerWrapperAlgorithm
        def __init__(self, installation_key: _Optional[bytes] = ..., welcome_pointer: _Optional[bytes] = ..., hpke_public_key: _Optional[bytes] = ..., wrapper_algorithm: _Optional[_Union[_message_contents_pb2.WelcomePointerWrapperAlgorithm, str]] = ...) -> None: ...
    V1_FIELD_NUMBER: _ClassVar[int]
    WELCOME_POINTER_FIELD_NUMBER: _ClassVar[int]
    v1: WelcomeMessageInput.V1
    welcome_pointer: WelcomeMessageInput.WelcomePointer
    def __init__(self, v1: _Optional[_Union[WelcomeMessageInput.V1, _Mapping]] = ..., welcome_pointer: _Optional[_Union[WelcomeMessageInput.WelcomePointer, _Mapping]] = ...) -> None: ...

class SendGroupMessagesRequest(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[GroupMessageInput]
    def __init__(self, messages: _Optional[_Iterable[_Union[GroupMessageInput, _Mapping]]] = ...) -> None: ...

class SendWelcomeMessagesRequest(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[WelcomeMessageInput]
    def __init__(self, messages: _Optional[_Iterable[_Union[WelcomeMessageInput, _Mapping]]] = ...) -> None: ...

class KeyPackageUpload(_message.Message):
    __slots__ = ("key_package_tls_serialized",)
    KEY_PACKAGE_TLS_SERIALIZED_FIELD_NUMBER: _ClassVar[int]
    key_package_tls_serialized: bytes
    def __init__(self, key_package_tls_serialized: _Optional[bytes] = ...) -> None: ...

class UploadKeyPackageRequest(_message.Message):
    __slots__ = ("key_package", "is_inbox_id_credential")
    KEY_PACKAGE_FIELD_NUMBER: _ClassVar[int]
    IS_INBOX_ID_CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    key_package: KeyPackageUpload
    is_inbox_id_credential: bool
    def __init__(self, key_package: _Optional[_Union[KeyPackageUpload, _Mapping]] = ..., is_inbox_id_credential: _Optional[bool] = ...) -> None: ...

class FetchKeyPackagesRequest(_message.Message):
    __slots__ = ("installation_keys",)
    INSTALLATION_KEYS_FIELD_NUMBER: _ClassVar[int]
    installation_keys: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, installation_keys: _Optional[_Iterable[bytes]] = ...) -> None: ...

class FetchKeyPackagesResponse(_message.Message):
    __slots__ = ("key_packages",)
    class KeyPackage(_message.Message):
        __slots__ = ("key_package_tls_serialized",)
        KEY_PACKAGE_TLS_SERIALIZED_FIELD_NUMBER: _ClassVar[int]
        key_package_tls_serialized: bytes
        def __init__(self, key_package_tls_serialized: _Optional[bytes] = ...) -> None: ...
    KEY_PACKAGES_FIELD_NUMBER: _ClassVar[int]
    key_packages: _containers.RepeatedCompositeFieldContainer[FetchKeyPackagesResponse.KeyPackage]
    def __init__(self, key_packages: _Optional[_Iterable[_Union[FetchKeyPackagesResponse.KeyPackage, _Mapping]]] = ...) -> None: ...

class PagingInfo(_message.Message):
    __slots__ = ("direction", "limit", "id_cursor")
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ID_CURSOR_FIELD_NUMBER: _ClassVar[int]
    direction: SortDirection
    limit: int
    id_cursor: int
    def __init__(self, direction: _Optional[_Union[SortDirection, str]] = ..., limit: _Optional[int] = ..., id_cursor: _Optional[int] = ...) -> None: ...

class QueryGroupMessagesRequest(_message.Message):
    __slots__ = ("group_id", "paging_info")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PAGING_INFO_FIELD_NUMBER: _ClassVar[int]
    group_id: bytes
    paging_info: PagingInfo
    def __init__(self, group_id: _Optional[bytes] = ..., paging_info: _Optional[_Union[PagingInfo, _Mapping]] = ...) -> None: ...

class QueryGroupMessagesResponse(_message.Message):
    __slots__ = ("messages", "paging_info")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PAGING_INFO_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[GroupMessage]
    paging_info: PagingInfo
    def __init__(self, messages: _Optional[_Iterable[_Union[GroupMessage, _Mapping]]] = ..., paging_info: _Optional[_Union[PagingInfo, _Mapping]] = ...) -> None: ...

class QueryWelcomeMessagesRequest(_message.Message):
    __slots__ = ("installation_key", "paging_info")
    INSTALLATION_KEY_FIELD_NUMBER: _ClassVar[int]
    PAGING_INFO_FIELD_NUMBER: _ClassVar[int]
    installation_key: bytes
    paging_info: PagingInfo
    def __init__(self, installation_key: _Optional[bytes] = ..., paging_info: _Optional[_Union[PagingInfo, _Mapping]] = ...) -> None: ...

class QueryWelcomeMessagesResponse(_message.Message):
    __slots__ = ("messages", "paging_info")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PAGING_INFO_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[WelcomeMessage]
    paging_info: PagingInfo
    def __init__(self, messages: _Optional[_Iterable[_Union[WelcomeMessage, _Mapping]]] = ..., paging_info: _Optional[_Union[PagingInfo, _Mapping]] = ...) -> None: ...

class SubscribeGroupMessagesRequest(_message.Message):
    __slots__ = ("filters",)
    class Filter(_message.Message):
        __slots__ = ("group_id", "id_cursor")
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        ID_CURSOR_FIELD_NUMBER: _ClassVar[int]
        group_id: bytes
        id_cursor: int
        def __init__(self, group_id: _Optional[bytes] = ..., id_cursor: _Optional[int] = ...) -> None: ...
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[SubscribeGroupMessagesRequest.Filter]
    def __init__(self, filters: _Optional[_Iterable[_Union[SubscribeGroupMessagesRequest.Filter, _Mapping]]] = ...) -> None: ...

class SubscribeWelcomeMessagesRequest(_message.Message):
    __slots__ = ("filters",)
    class Filter(_message.Message):
        __slots__ = ("installation_key", "id_cursor")
        INSTALLATION_KEY_FIELD_NUMBER: _ClassVar[int]
        ID_CURSOR_FIELD_NUMBER: _ClassVar[int]
        installation_key: bytes
        id_cursor: int
        def __init__(self, installation_key: _Optional[bytes] = ..., id_cursor: _Optional[int] = ...) -> None: ...
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[SubscribeWelcomeMessagesRequest.Filter]
    def __init__(self, filters: _Optional[_Iterable[_Union[SubscribeWelcomeMessagesRequest.Filter, _Mapping]]] = ...) -> None: ...

class BatchPublishCommitLogRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[PublishCommitLogRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[PublishCommitLogRequest, _Mapping]]] = ...) -> None: ...

class PublishCommitLogRequest(_message.Message):
    __slots__ = ("group_id", "serialized_commit_log_entry", "signature")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SERIALIZED_COMMIT_LOG_ENTRY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    group_id: bytes
    serialized_commit_log_entry: bytes
    signature: bytes
    def __init__(self, group_id: _Optional[bytes] = ..., serialized_commit_log_entry: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class QueryCommitLogRequest(_message.Message):
    __slots__ = ("group_id", "paging_info")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PAGING_INFO_FIELD_NUMBER: _ClassVar[int]
    group_id: bytes
    paging_info: PagingInfo
    def __init__(self, group_id: _Optional[bytes] = ..., paging_info: _Optional[_Union[PagingInfo, _Mapping]] = ...) -> None: ...

class QueryCommitLogResponse(_message.Message):
    __slots__ = ("group_id", "commit_log_entries", "paging_info")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    PAGING_INFO_FIELD_NUMBER: _ClassVar[int]
    group_id: bytes
    commit_log_entries: _containers.RepeatedCompositeFieldContainer[_message_contents_pb2.CommitLogEntry]
    paging_info: PagingInfo
    def __init__(self, group_id: _Optional[bytes] = ..., commit_log_entries: _Optional[_Iterable[_Union[_message_contents_pb2.CommitLogEntry, _Mapping]]] = ..., paging_info: _Optional[_Union[PagingInfo, _Mapping]] = ...) -> None: ...

class BatchQueryCommitLogRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[QueryCommitLogRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[QueryCommitLogRequest, _Mapping]]] = ...) -> None: ...

class BatchQueryCommitLogResponse(_message.Message):
    __slots__ = ("responses",)
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[QueryCommitLogResponse]
    def __init__(self, responses: _Optional[_Iterable[_Union[QueryCommitLogResponse, _Mapping]]] = ...) -> None: ...

class GetNewestGroupMessageRequest(_message.Message):
    __slots__ = ("group_ids", "include_content")
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CONTENT_FIELD_NUMBER: _ClassVar[int]
    group_ids: _containers.RepeatedScalarFieldContainer[bytes]
    include_content: bool
    def __init__(self, group_ids: _Optional[_Iterable[bytes]] = ..., include_content: _Optional[bool] = ...) -> None: ...

class GetNewestGroupMessageResponse(_message.Message):
    __slots__ = ("responses",)
    class Response(_message.Message):
        __slots__ = ("group_message",)
        GROUP_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        group_message: GroupMessage
        def __init__(self, group_message: _Optional[_Union[GroupMessage, _Mapping]] = ...) -> None: ...
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[GetNewestGroupMessageResponse.Response]
    def __init__(self, responses: _Optional[_Iterable[_Union[GetNewestGroupMessageResponse.Response, _Mapping]]] = ...) -> None: ...
