"""Requests that do not decode are INVALID_ARGUMENT with cone's ErrorInfo.

grpc decodes a request before any servicer code runs, and a DecodeError there (invalid
UTF-8 in a string field, a corrupt body) reaches the client as UNKNOWN "Unexpected
<class 'DecodeError'>" without the details the proto promises on every failure. Every
unary-request method gets a deserializer that never raises (`tolerant`), and
`undecodable` answers an undecodable request itself, as any other invalid argument is
answered (cone/daemon/edge.py applies both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cone.errors import ConeError, InvalidArgument


class _Undecodable:
    """What the tolerant deserializer hands over instead of raising."""

    def __init__(self, why: str) -> None:
        self.why = why


def tolerant(deserialize: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """`deserialize`, handing over an `_Undecodable` where it would raise."""

    def decode(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except Exception as exc:  # a client's bytes: answered, never raised into grpc
            return _Undecodable(str(exc) or type(exc).__name__)

    return decode


def undecodable(request: Any) -> ConeError | None:
    """The answer to a request that did not decode; None for one that did."""
    if isinstance(request, _Undecodable):
        return InvalidArgument(f"the request does not decode: {request.why}")
    return None


__all__ = ["tolerant", "undecodable"]
