from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor
OPERATION_FIELD_NUMBER: _ClassVar[int]
operation: _descriptor.FieldDescriptor
EXPECT_FIELD_NUMBER: _ClassVar[int]
expect: _descriptor.FieldDescriptor

class Operation(_message.Message):
    __slots__ = ("summary", "read_only", "long_poll", "operator", "not_exposed", "not_a_tool")
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    LONG_POLL_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    NOT_EXPOSED_FIELD_NUMBER: _ClassVar[int]
    NOT_A_TOOL_FIELD_NUMBER: _ClassVar[int]
    summary: str
    read_only: bool
    long_poll: bool
    operator: bool
    not_exposed: str
    not_a_tool: str
    def __init__(self, summary: _Optional[str] = ..., read_only: _Optional[bool] = ..., long_poll: _Optional[bool] = ..., operator: _Optional[bool] = ..., not_exposed: _Optional[str] = ..., not_a_tool: _Optional[str] = ...) -> None: ...
