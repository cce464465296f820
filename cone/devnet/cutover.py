"""The devnet's V3 -> D14N cutover time: parsing it, and the V3 node's migration API
that reports it (`xmtp.migration.api.v1.D14nMigrationApi/FetchD14nCutover`).

What the V3 side refuses once the time has passed is in `faults.py` (the refusals)
and `interceptor.py` (where they apply); `Faults.set_cutover` holds the time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

from cone.errors import InvalidArgument
from conepb.xmtpmigration import migration_pb2, migration_pb2_grpc

if TYPE_CHECKING:
    from google.protobuf import empty_pb2

#: The cutover time while none is set: the largest signed 64-bit value, as libxmtp's
#: own local setup starts xmtp-node-go (`--api.d14n-cutover-ns=9223372036854775807`)
#: and as libxmtp's cutover table defaults it.
NO_CUTOVER_NS: Final = 2**63 - 1


def parse_time(text: str) -> int:
    """A cutover time in Unix nanoseconds from `now`, `+SECONDS` (from now), an
    ISO 8601 time (`2026-12-03T17:00:00Z`; without an offset, UTC) or Unix
    nanoseconds (as node-go's `--api.d14n-cutover-ns` takes them)."""
    value = text.strip()
    try:
        if value == "now":
            return time.time_ns()
        if value.startswith("+"):
            return time.time_ns() + round(float(value[1:].removesuffix("s")) * 1e9)
        if value.isdigit():
            return int(value)
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None:
        raise InvalidArgument(
            f"{text!r} is not a cutover time: give `now`, `+SECONDS`, an ISO 8601 time "
            "such as 2026-12-03T17:00:00Z, or Unix nanoseconds",
            field="cutover_at",
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def format_time(ns: int) -> str:
    """A cutover time as ISO 8601 UTC, or `never` for `NO_CUTOVER_NS`."""
    if ns >= NO_CUTOVER_NS:
        return "never"
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat().replace("+00:00", "Z")


class HoldsCutover(Protocol):
    """What holds the cutover time (`Faults`, which imports this module)."""

    @property
    def cutover_ns(self) -> int: ...


class MigrationService(migration_pb2_grpc.D14nMigrationApiServicer):
    """`D14nMigrationApi` on the V3 side: the cutover time `Faults` holds."""

    def __init__(self, faults: HoldsCutover) -> None:
        self._faults = faults

    async def FetchD14nCutover(
        self, request: empty_pb2.Empty, context: Any
    ) -> migration_pb2.FetchD14nCutoverResponse:
        return migration_pb2.FetchD14nCutoverResponse(timestamp_ns=self._faults.cutover_ns)
