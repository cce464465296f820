"""The JSON-RPC 2.0 facade (`cone serve`, and JSON-RPC on `cone.sock`).

Three layers, each its own module: framing (`_framing`: lines in, lines out, the
line-length limit), dispatch (`_dispatch`: envelopes, ids, concurrency, cancellation,
batches, the error boundary) and handlers (`_relay`: one generic relay per method,
from the shared schema in `cone.schema` to a ConeService call). `_session` joins them
over a byte stream; `_socket` serves them on `cone.sock`; `command` is `cone serve`.
docs/protocol.md is the reference.
"""

from cone.facades.jsonrpc._dispatch import ANSWER_MAX_BYTES, CANCELLED, Dispatcher
from cone.facades.jsonrpc._errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    JsonRpcError,
    LineTooLong,
    MethodNotFound,
    ParseError,
)
from cone.facades.jsonrpc._framing import MAX_LINE_BYTES, LineWriter, read_lines
from cone.facades.jsonrpc._relay import Caller, Relay
from cone.facades.jsonrpc._session import run_session
from cone.facades.jsonrpc._socket import JsonRpcOnSocket

__all__ = [
    "ANSWER_MAX_BYTES",
    "CANCELLED",
    "MAX_LINE_BYTES",
    "Caller",
    "Dispatcher",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "JsonRpcError",
    "JsonRpcOnSocket",
    "LineTooLong",
    "LineWriter",
    "MethodNotFound",
    "ParseError",
    "Relay",
    "read_lines",
    "run_session",
]
