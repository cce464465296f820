"""ConeError ↔ gRPC status, both directions, in one module.

The status details carry one google.rpc.ErrorInfo: domain `cone.chat`, the reason,
and metadata `field` / `retryAfterMs` where set. A status without it comes from gRPC
itself: UNAVAILABLE is the daemon gone (`daemon_unavailable`, retryable);
RESOURCE_EXHAUSTED is a message over gRPC's size limit (`internal`, not retryable).
"""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from cone.errors import DOMAIN, ConeError, Internal, error_class_for


def to_status(err: ConeError) -> grpc.Status:
    """The rich gRPC status for an error."""
    info = error_details_pb2.ErrorInfo(reason=err.reason, domain=DOMAIN)
    if err.field is not None:
        info.metadata["field"] = err.field
    if err.retry_after_ms is not None:
        info.metadata["retryAfterMs"] = str(err.retry_after_ms)
    status = status_pb2.Status(code=err.grpc_code.value[0], message=err.message)
    status.details.add().Pack(info)
    return rpc_status.to_status(status)


def from_rpc_error(exc: grpc.RpcError) -> ConeError:
    """The ConeError a failed call carries (facades and clients use this)."""
    code: grpc.StatusCode = exc.code()
    try:
        status = rpc_status.from_call(exc)
    except ValueError:
        status = None
    return _cone_error(code, exc.details() or code.name, status)


def from_status(status: grpc.Status) -> ConeError:
    """The ConeError a client would raise for `status` (a call answered in process)."""
    details = dict(status.trailing_metadata or ()).get(_DETAILS_KEY)
    proto = status_pb2.Status.FromString(details) if isinstance(details, bytes) else None
    return _cone_error(status.code, status.details or status.code.name, proto)


def from_code(code: grpc.StatusCode, message: str) -> ConeError:
    """The ConeError a client raises for a status gRPC itself gave (no details)."""
    return _cone_error(code, message, None)


_DETAILS_KEY = "grpc-status-details-bin"


def _cone_error(code: grpc.StatusCode, message: str, status: status_pb2.Status | None) -> ConeError:
    reason: str | None = None
    field: str | None = None
    retry: int | None = None
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info) and info.domain == DOMAIN:
                reason = info.reason
                field = info.metadata.get("field")
                if "retryAfterMs" in info.metadata:
                    retry = int(info.metadata["retryAfterMs"])
    if reason is None and code == grpc.StatusCode.UNAVAILABLE:
        reason = "daemon_unavailable"
    if reason is None and code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        # Without cone's ErrorInfo this is gRPC itself refusing the call (a message
        # over its size limit), not XMTP's rate limit: the same call fails again.
        return Internal(f"gRPC refused the call: {message}")
    cls = error_class_for(code, reason)
    return cls(message, reason=reason, field=field, retry_after_ms=retry)
