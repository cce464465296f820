from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Compression(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPRESSION_DEFLATE: _ClassVar[Compression]
    COMPRESSION_GZIP: _ClassVar[Compression]

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
COMPRESSION_DEFLATE: Compression
COMPRESSION_GZIP: Compression
REACTION_ACTION_UNSPECIFIED: ReactionAction
REACTION_ACTION_ADDED: ReactionAction
REACTION_ACTION_REMOVED: ReactionAction
REACTION_SCHEMA_UNSPECIFIED: ReactionSchema
REACTION_SCHEMA_UNICODE: ReactionSchema
REACTION_SCHEMA_SHORTCODE: ReactionSchema
REACTION_SCHEMA_CUSTOM: ReactionSchema

class ContentTypeId(_message.Message):
    __slots__ = ("authority_id", "type_id", "version_major", "version_minor")
    AUTHORITY_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_MAJOR_FIELD_NUMBER: _ClassVar[int]
    VERSION_MINOR_FIELD_NUMBER: _ClassVar[int]
    authority_id: str
    type_id: str
    version_major: int
    version_minor: int
    def __init__(self, authority_id: _Optional[str] = ..., type_id: _Optional[str] = ..., version_major: _Optional[int] = ..., version_minor: _Optional[int] = ...) -> None: ...

class EncodedContent(_message.Message):
    __slots__ = ("type", "parameters", "fallback", "compression", "content")
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    type: ContentTypeId
    parameters: _containers.ScalarMap[str, str]
    fallback: str
    compression: Compression
    content: bytes
    def __init__(self, type: _Optional[_Union[ContentTypeId, _Mapping]] = ..., parameters: _Optional[_Mapping[str, str]] = ..., fallback: _Optional[str] = ..., compression: _Optional[_Union[Compression, str]] = ..., content: _Optional[bytes] = ...) -> None: ...

class ReactionV2(_message.Message):
    __slots__ = ("reference", "reference_inbox_id", "action", "content", "schema")
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    reference: str
    reference_inbox_id: str
    action: ReactionAction
    content: str
    schema: ReactionSchema
    def __init__(self, reference: _Optional[str] = ..., reference_inbox_id: _Optional[str] = ..., action: _Optional[_Union[ReactionAction, str]] = ..., content: _Optional[str] = ..., schema: _Optional[_Union[ReactionSchema, str]] = ...) -> None: ...

class RemoteAttachmentInfo(_message.Message):
    __slots__ = ("content_digest", "secret", "nonce", "salt", "scheme", "url", "content_length", "filename")
    CONTENT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    CONTENT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    content_digest: str
    secret: bytes
    nonce: bytes
    salt: bytes
    scheme: str
    url: str
    content_length: int
    filename: str
    def __init__(self, content_digest: _Optional[str] = ..., secret: _Optional[bytes] = ..., nonce: _Optional[bytes] = ..., salt: _Optional[bytes] = ..., scheme: _Optional[str] = ..., url: _Optional[str] = ..., content_length: _Optional[int] = ..., filename: _Optional[str] = ...) -> None: ...

class MultiRemoteAttachment(_message.Message):
    __slots__ = ("attachments",)
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    attachments: _containers.RepeatedCompositeFieldContainer[RemoteAttachmentInfo]
    def __init__(self, attachments: _Optional[_Iterable[_Union[RemoteAttachmentInfo, _Mapping]]] = ...) -> None: ...
