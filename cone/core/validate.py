"""Defaults of request fields the proto leaves to the core.

The rules themselves (ranges, patterns, sizes) are the buf.validate annotations of
proto/conepb/v1/cone.proto, checked once at the daemon's gRPC edge
(`cone.daemon.validation`): a value that reaches the core has passed them.
"""

from __future__ import annotations

from cone import limits


def consumer(value: str) -> str:
    """The consumer name, `default` when empty."""
    return value or limits.DEFAULT_CONSUMER


def receive_limit(value: int | None) -> int:
    """The batch size, 50 when absent."""
    return limits.RECEIVE_LIMIT_DEFAULT if value is None else value
