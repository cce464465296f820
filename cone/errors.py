"""The cone error tree and the one table that maps it onto every wire.

```
ConeError                      reason (default)        gRPC                 JSON-RPC  exit
├── InvalidArgument            invalid_argument        INVALID_ARGUMENT     -32602    2
├── NotFound                   not_found               NOT_FOUND            -32002    3
├── Conflict                   conflict                ALREADY_EXISTS       -32003    4
├── FailedPrecondition         failed_precondition     FAILED_PRECONDITION  -32004    4
├── Unavailable                network_unavailable     UNAVAILABLE          -32001    5
├── RateLimited                rate_limited            RESOURCE_EXHAUSTED   -32005    5
├── StateError                 state_error             FAILED_PRECONDITION  -32006    6
│   │ (lock held, wrong database key, installation mismatch, bad permissions,
│   │  storage full, corrupt database)
│   └── NoIdentity             no_identity             FAILED_PRECONDITION  -32007    7
│       (the state directory has no identity: a one-shot command never makes one)
├── TargetError                target_error            FAILED_PRECONDITION  -32008    8
│     (a file or port named on the command line cannot be used: disk_full,
│      not_writable, address_in_use)
└── Internal                   internal                INTERNAL             -32603    1
```

Inside the core, code raises these with a stable `reason`. Each process translates
exactly once at its boundary: the servicer into a gRPC status whose details carry a
`google.rpc.ErrorInfo` (domain `cone.chat`, the reason, and metadata `field` and
`retryAfterMs` where set); the client back into the same `ConeError`; each facade into
its wire (JSON-RPC codes, MCP `isError`, CLI exit codes) through `jsonrpc_code` and
`exit_code` below.

Only `Unavailable` and `RateLimited` are `retryable`: the same call may succeed later
(the network or the daemon is back, the rate limit has passed). Every other error is
deterministic: retrying the same call gives the same answer, so a loop that retries
must surface it instead (the bridge parks the turn or stops; docs/bridge.md).
"""

from __future__ import annotations

import errno
from typing import ClassVar, Final

import grpc

DOMAIN: Final = "cone.chat"


class ConeError(Exception):
    """Base of every error cone reports. `reason` is stable and machine-readable."""

    default_reason: ClassVar[str] = "internal"
    grpc_code: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL
    jsonrpc_code: ClassVar[int] = -32603
    exit_code: ClassVar[int] = 1
    #: Whether the same call may succeed later (see the module docstring).
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        field: str | None = None,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.field = field
        self.retry_after_ms = retry_after_ms

    def data(self) -> dict[str, object]:
        """The machine-readable part, as facades put it on their wire."""
        data: dict[str, object] = {"reason": self.reason}
        if self.field is not None:
            data["field"] = self.field
        if self.retry_after_ms is not None:
            data["retryAfterMs"] = self.retry_after_ms
        return data


class InvalidArgument(ConeError):
    """A parameter is missing, of the wrong type or out of range; `field` names it."""

    default_reason = "invalid_argument"
    grpc_code = grpc.StatusCode.INVALID_ARGUMENT
    jsonrpc_code = -32602
    exit_code = 2


class NotFound(ConeError):
    """A destination, conversation or message does not exist."""

    default_reason = "not_found"
    grpc_code = grpc.StatusCode.NOT_FOUND
    jsonrpc_code = -32002
    exit_code = 3


class Conflict(ConeError):
    """The request contradicts what is recorded (a key or a contact name in use)."""

    default_reason = "conflict"
    grpc_code = grpc.StatusCode.ALREADY_EXISTS
    jsonrpc_code = -32003
    exit_code = 4


class FailedPrecondition(ConeError):
    """The request is valid but the state does not allow it (e.g. reply to a request)."""

    default_reason = "failed_precondition"
    grpc_code = grpc.StatusCode.FAILED_PRECONDITION
    jsonrpc_code = -32004
    exit_code = 4


class Unavailable(ConeError):
    """The network or the daemon cannot be reached; retry later."""

    default_reason = "network_unavailable"
    grpc_code = grpc.StatusCode.UNAVAILABLE
    jsonrpc_code = -32001
    exit_code = 5
    retryable = True


class RateLimited(ConeError):
    """XMTP's rate limit was hit; `retry_after_ms` says when to retry, where known."""

    default_reason = "rate_limited"
    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED
    jsonrpc_code = -32005
    exit_code = 5
    retryable = True


class StateError(ConeError):
    """The state directory cannot be used: locked, wrong key, bad permissions."""

    default_reason = "state_error"
    grpc_code = grpc.StatusCode.FAILED_PRECONDITION
    jsonrpc_code = -32006
    exit_code = 6


class NoIdentity(StateError):
    """The state directory has no identity, and this command never creates one
    (only `cone init` and the long-running hosts do)."""

    default_reason = "no_identity"
    jsonrpc_code = -32007
    exit_code = 7

    @classmethod
    def of(cls, home: object) -> NoIdentity:
        """The error for state directory `home`, saying how to create its identity."""
        return cls(
            f"{home} has no identity (nothing was created there): create one with "
            f"`cone init --home {home}`, or give the --home that has it"
        )


class TargetError(ConeError):
    """A file or port the operator named (a backup or log file, a restore's target, an
    HTTP port) cannot be used: its disk is full (`disk_full`), it cannot be written
    (`not_writable`), the port is taken (`address_in_use`). The state directory's own
    full disk is `StateError(storage_full)`."""

    default_reason = "target_error"
    grpc_code = grpc.StatusCode.FAILED_PRECONDITION
    jsonrpc_code = -32008
    exit_code = 8


class Internal(ConeError):
    """A bug or an unexpected failure; the message says what was being done."""


# The one mapping table: reason-independent lookups by wire code, used when an error
# crosses back from gRPC (the ErrorInfo reason then picks the exact class where known).
_BY_GRPC: Final[dict[grpc.StatusCode, type[ConeError]]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: Conflict,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: RateLimited,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNKNOWN: Internal,
}

#: The reason for XMTP's V3 node refusing cone after its cutover to the decentralized
#: network (D14N): final, not an outage (FailedPrecondition; docs/networks.md).
V3_CUTOVER: Final = "v3_cutover"

#: The reason for a send to a node that does not know this identity (no identity
#: updates for its inbox, or no key package for its installation): the node was reset
#: or is another network (FailedPrecondition; docs/networks.md).
IDENTITY_UNKNOWN: Final = "identity_unknown"

# Reasons that belong to StateError although they travel as FAILED_PRECONDITION.
STATE_REASONS: Final = frozenset(
    {
        "state_error",
        "locked",
        "wrong_key",
        "installation_mismatch",
        "bad_permissions",
        "storage_full",
        "corrupt_database",
    }
)
# Reasons of TargetError (they travel as FAILED_PRECONDITION too).
TARGET_REASONS: Final = frozenset({"target_error", "disk_full", "not_writable", "address_in_use"})
# Reasons with a class of their own below their wire code's class.
_BY_REASON: Final[dict[str, type[ConeError]]] = {"no_identity": NoIdentity}

# How SQLite (cone's store and libxmtp's) and the OS say that the disk is full.
_FULL_MARKERS: Final = ("database or disk is full", "no space left on device")


def one_line(text: str) -> str:
    """A message on one line: whitespace (newlines included) collapsed. libxmtp's own
    text is made plain first by `cone.engine._errors.plain`."""
    return " ".join(text.split())


UNKNOWN_CONVERSATION = "unknown_conversation"


def unknown_conversation(conversation_id: str) -> NotFound:
    """The one NotFound for a conversation id this inbox does not know (raised by the
    store, the core and the engine alike)."""
    return NotFound(
        f"conversation {conversation_id} is not known to this inbox: it records no "
        "conversation with this id (`conversations` lists them; one created elsewhere "
        "moments ago arrives with the next `sync`)",
        reason=UNKNOWN_CONVERSATION,
        field="conversationId",
    )


def storage_full(text: str) -> bool:
    """Whether an error message says the state directory's disk is full."""
    lowered = text.lower()
    return any(marker in lowered for marker in _FULL_MARKERS)


# errno values that say the disk is full, that a file cannot be written there, and
# that a port is taken.
_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_DENIED_ERRNOS: Final = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR, errno.EISDIR}
)


def os_failure(exc: OSError, what: str | None = None) -> ConeError:
    """The one-line ConeError for an OSError met writing `what` (a file or a port;
    else the OSError's file name, when it has one). A full disk is `disk_full`, a place
    that cannot be written `not_writable`, a port in use `address_in_use`."""
    what = what or (f"{exc.filename}" if exc.filename else None)
    said = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        return TargetError(
            f"{what or 'the address'} is already in use: stop what listens there or "
            "choose another port",
            reason="address_in_use",
        )
    if exc.errno in _FULL_ERRNOS or storage_full(said):
        place = f"the disk holding {what}" if what else "the disk being written"
        return TargetError(
            f"{place} is full ({said}): free space there or choose another place",
            reason="disk_full",
        )
    if exc.errno in _DENIED_ERRNOS:
        return TargetError(
            f"{what or 'a file'} cannot be written ({said}): check that its directory "
            "exists and that this user may write there",
            reason="not_writable",
        )
    return TargetError(f"{what or 'a file'} cannot be used: {said}")


def error_class_for(code: grpc.StatusCode, reason: str | None) -> type[ConeError]:
    """The ConeError class for a gRPC status code and ErrorInfo reason."""
    if reason in _BY_REASON:
        return _BY_REASON[reason]
    if reason in STATE_REASONS:
        return StateError
    if reason in TARGET_REASONS:
        return TargetError
    return _BY_GRPC.get(code, Internal)


__all__ = [
    "DOMAIN",
    "IDENTITY_UNKNOWN",
    "STATE_REASONS",
    "TARGET_REASONS",
    "V3_CUTOVER",
    "ConeError",
    "Conflict",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "NoIdentity",
    "NotFound",
    "RateLimited",
    "StateError",
    "TargetError",
    "Unavailable",
    "error_class_for",
    "os_failure",
    "storage_full",
]
