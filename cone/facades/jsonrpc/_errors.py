"""JSON-RPC 2.0 errors: one exception class per protocol error code.

Application errors are not here: a ConeError carries its own JSON-RPC code
(`cone.errors`, -32000…-32099 and -32602/-32603) and `data()`; `error_object`
turns either kind into the response's `error` member, once, at the facade's edge.
"""

from __future__ import annotations

from typing import Any, ClassVar

from cone.errors import ConeError


class JsonRpcError(Exception):
    """A protocol-level error; `reason` goes into `data.reason`."""

    code: ClassVar[int] = -32603
    reason: ClassVar[str] = "internal"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data: dict[str, Any] = {"reason": self.reason, **data}


class ParseError(JsonRpcError):
    """The line is not a JSON text (bad UTF-8, bad syntax, too deep)."""

    code = -32700
    reason = "parse_error"


class InvalidRequest(JsonRpcError):
    """The JSON is not a valid request object (or the line is over the limit)."""

    code = -32600
    reason = "invalid_request"


class LineTooLong(InvalidRequest):
    """The line is longer than the documented maximum; it was skipped unread."""

    reason = "line_too_long"


class AnswerTooLarge(InvalidRequest):
    """The answer would pass the bound of one answer (a batch's as a whole); the call
    ran, its result was dropped before it was added."""

    reason = "answer_too_large"


class MethodNotFound(JsonRpcError):
    """No such method."""

    code = -32601
    reason = "method_not_found"


class InvalidParams(JsonRpcError):
    """`params` has the wrong shape (not an object)."""

    code = -32602
    reason = "invalid_argument"


class InternalError(JsonRpcError):
    """A bug in the facade; the message says what was being done."""


def error_object(exc: JsonRpcError | ConeError) -> dict[str, Any]:
    """The `error` member of a response for an exception."""
    if isinstance(exc, ConeError):
        return {"code": exc.jsonrpc_code, "message": exc.message, "data": exc.data()}
    return {"code": exc.code, "message": exc.message, "data": exc.data}


__all__ = [
    "AnswerTooLarge",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "JsonRpcError",
    "LineTooLong",
    "MethodNotFound",
    "ParseError",
    "error_object",
]
