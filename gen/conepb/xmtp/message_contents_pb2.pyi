from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class WelcomeWrapperAlgorithm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WELCOME_WRAPPER_ALGORITHM_UNSPECIFIED: _ClassVar[WelcomeWrapperAlgorithm]
    WELCOME_WRAPPER_ALGORITHM_CURVE25519: _ClassVar[WelcomeWrapperAlgorithm]
    WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6: _ClassVar[WelcomeWrapperAlgorithm]
    WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY: _ClassVar[WelcomeWrapperAlgorithm]

class WelcomePointerWrapperAlgorithm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WELCOME_POINTER_WRAPPER_ALGORITHM_UNSPECIFIED: _ClassVar[WelcomePointerWrapperAlgorithm]
    WELCOME_POINTER_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6: _ClassVar[WelcomePointerWrapperAlgorithm]
WELCOME_WRAPPER_ALGORITHM_UNSPECIFIED: WelcomeWrapperAlgorithm
WELCOME_WRAPPER_ALGORITHM_CURVE25519: WelcomeWrapperAlgorithm
WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6: WelcomeWrapperAlgorithm
WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY: WelcomeWrapperAlgorithm
WELCOME_POINTER_WRAPPER_ALGORITHM_UNSPECIFIED: WelcomePointerWrapperAlgorithm
WELCOME_POINTER_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6: WelcomePointerWrapperAlgorithm

class CommitLogEntry(_message.Message):
    __slots__ = ("sequence_id", "serialized_commit_log_entry", "signature")
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    SERIALIZED_COMMIT_LOG_ENTRY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    sequence_id: int
    serialized_commit_log_entry: bytes
    signature: bytes
    def __init__(self, sequence_id: _Optional[int] = ..., serialized_commit_log_entry: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...
