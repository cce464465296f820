from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class FetchD14nCutoverResponse(_message.Message):
    __slots__ = ("timestamp_ns",)
    TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    timestamp_ns: int
    def __init__(self, timestamp_ns: _Optional[int] = ...) -> None: ...
