"""The one way into libxmtp: off the event loop, under a time bound, errors translated.

Every libxmtp call of the engine goes through `Calls`: `Offload` runs it on a worker
thread under its bound (see _offload.py), and a libxmtp error (`FfiError`) comes back
as the ConeError `_errors` reads in its text. A call that overruns its bound is
Unavailable("… did not finish in N s").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Final, TypeVar

from xmtp_bindings import xmtpv3 as ffi

from cone.engine._errors import translate
from cone.engine._offload import Offload
from cone.errors import ConeError

T = TypeVar("T")

# Bounds on libxmtp calls: libxmtp retries failed node calls itself for about 6 s, so
# a call still running after these is stuck; it is reported as a failure and retried
# by the caller's own schedule instead of holding ingest or catch-up forever.
LOCAL_CALL_S: Final = 30.0
NETWORK_CALL_S: Final = 120.0

#: A narrower reading of a libxmtp error, tried before `translate` (None: no match).
Refusal = Callable[[BaseException, str], ConeError | None]


def _unnoted(err: ConeError) -> None:
    pass


@dataclass(frozen=True)
class Calls:
    """Bounded, translated libxmtp calls on one offload.

    `noted` is told every error translated (the engine watches for the V3 cutover);
    `refusal` reads an error first (the groups adapter's membership refusals)."""

    offload: Offload
    noted: Callable[[ConeError], None] = _unnoted
    refusal: Refusal | None = None

    def refusing(self, refusal: Refusal) -> Calls:
        """These calls, with `refusal` reading each error before `translate`."""
        return replace(self, refusal=refusal)

    async def call(
        self,
        make: Callable[[], Awaitable[T]],
        seconds: float,
        doing: str,
        reason: str = "network_unavailable",
    ) -> T:
        """Make an asynchronous libxmtp call and await it on a worker (libxmtp works
        on the thread that polls it), within `seconds`."""
        try:
            return await self.offload.run(make, seconds, doing)
        except ffi.FfiError as exc:
            raise self.error(exc, doing, reason) from exc

    async def call_sync(
        self,
        fn: Callable[[], T],
        seconds: float,
        doing: str,
        reason: str = "network_unavailable",
    ) -> T:
        """Make a synchronous libxmtp call on a worker, within `seconds`."""
        try:
            return await self.offload.run_sync(fn, seconds, doing)
        except ffi.FfiError as exc:
            raise self.error(exc, doing, reason) from exc

    def error(
        self, exc: BaseException, doing: str, reason: str = "network_unavailable"
    ) -> ConeError:
        """The ConeError for a libxmtp error while `doing`, noted."""
        err = (self.refusal and self.refusal(exc, doing)) or translate(exc, doing, reason)
        self.noted(err)
        return err


def answered(err: ConeError) -> bool:
    """Whether an error of `Calls` is libxmtp's answer (its error, translated), not a
    call that overran its bound."""
    return err.__cause__ is not None


__all__ = ["LOCAL_CALL_S", "NETWORK_CALL_S", "Calls", "Refusal", "answered"]
