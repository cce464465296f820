from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DropStreamsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DropStreamsResponse(_message.Message):
    __slots__ = ("dropped_streams",)
    DROPPED_STREAMS_FIELD_NUMBER: _ClassVar[int]
    dropped_streams: int
    def __init__(self, dropped_streams: _Optional[int] = ...) -> None: ...

class FailCallsRequest(_message.Message):
    __slots__ = ("method", "count", "code", "message")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    method: str
    count: int
    code: int
    message: str
    def __init__(self, method: _Optional[str] = ..., count: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class FailCallsResponse(_message.Message):
    __slots__ = ("method",)
    METHOD_FIELD_NUMBER: _ClassVar[int]
    method: str
    def __init__(self, method: _Optional[str] = ...) -> None: ...

class SetLatencyRequest(_message.Message):
    __slots__ = ("method", "latency_ms")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    method: str
    latency_ms: int
    def __init__(self, method: _Optional[str] = ..., latency_ms: _Optional[int] = ...) -> None: ...

class SetLatencyResponse(_message.Message):
    __slots__ = ("method",)
    METHOD_FIELD_NUMBER: _ClassVar[int]
    method: str
    def __init__(self, method: _Optional[str] = ...) -> None: ...

class ClearFaultsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClearFaultsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetV3CutoverRequest(_message.Message):
    __slots__ = ("on", "at_ns")
    ON_FIELD_NUMBER: _ClassVar[int]
    AT_NS_FIELD_NUMBER: _ClassVar[int]
    on: bool
    at_ns: int
    def __init__(self, on: _Optional[bool] = ..., at_ns: _Optional[int] = ...) -> None: ...

class SetV3CutoverResponse(_message.Message):
    __slots__ = ("ended_streams", "cutover_ns")
    ENDED_STREAMS_FIELD_NUMBER: _ClassVar[int]
    CUTOVER_NS_FIELD_NUMBER: _ClassVar[int]
    ended_streams: int
    cutover_ns: int
    def __init__(self, ended_streams: _Optional[int] = ..., cutover_ns: _Optional[int] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MethodStats(_message.Message):
    __slots__ = ("method", "calls", "total_ns")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NS_FIELD_NUMBER: _ClassVar[int]
    method: str
    calls: int
    total_ns: int
    def __init__(self, method: _Optional[str] = ..., calls: _Optional[int] = ..., total_ns: _Optional[int] = ...) -> None: ...

class GetStatsResponse(_message.Message):
    __slots__ = ("methods", "stream_deliveries", "stream_delivery_total_ns", "open_streams")
    METHODS_FIELD_NUMBER: _ClassVar[int]
    STREAM_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    STREAM_DELIVERY_TOTAL_NS_FIELD_NUMBER: _ClassVar[int]
    OPEN_STREAMS_FIELD_NUMBER: _ClassVar[int]
    methods: _containers.RepeatedCompositeFieldContainer[MethodStats]
    stream_deliveries: int
    stream_delivery_total_ns: int
    open_streams: int
    def __init__(self, methods: _Optional[_Iterable[_Union[MethodStats, _Mapping]]] = ..., stream_deliveries: _Optional[int] = ..., stream_delivery_total_ns: _Optional[int] = ..., open_streams: _Optional[int] = ...) -> None: ...
