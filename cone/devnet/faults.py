"""Fault injection: fail the next calls of a method, delay a method, drop every stream,
answer as XMTP's V3 node does after its cutover to the decentralized network (from
now, or from a time set in advance).

The state lives here; `interceptor.py` applies it to incoming calls, and
`control.py` exposes it on a Unix socket to other processes.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import grpc

from cone.devnet.cutover import NO_CUTOVER_NS
from cone.devnet.hub import EndReason
from cone.errors import InvalidArgument

#: What xmtp-node-go answers once its D14N cutover has passed (`--api.d14n-cutover-ns`).
V3_PUBLISH_REFUSED = (
    "publishing to XMTP V3 is no longer available. Please upgrade your client to XMTP D14N."
)
#: The node-go methods that publish, refused after the cutover (RegisterInstallation
#: too, which the devnet does not serve).
V3_PUBLISH_METHODS = frozenset(
    {
        "/xmtp.mls.api.v1.MlsApi/UploadKeyPackage",
        "/xmtp.mls.api.v1.MlsApi/SendGroupMessages",
        "/xmtp.mls.api.v1.MlsApi/SendWelcomeMessages",
        "/xmtp.mls.api.v1.MlsApi/BatchPublishCommitLog",
        "/xmtp.identity.api.v1.IdentityApi/PublishIdentityUpdate",
    }
)
#: The subscriptions refused after the cutover (open ones end within node-go's 5 s check).
V3_SUBSCRIBE_METHODS = frozenset(
    {
        "/xmtp.mls.api.v1.MlsApi/SubscribeGroupMessages",
        "/xmtp.mls.api.v1.MlsApi/SubscribeWelcomeMessages",
    }
)


@dataclass(slots=True)
class _Failure:
    remaining: int
    code: grpc.StatusCode
    message: str


class Faults:
    """The faults injected into one devnet, by method path."""

    def __init__(self, methods: Iterable[str], drop_streams: Callable[[EndReason], int]) -> None:
        """`methods` are the full paths served; `drop_streams` ends every open stream
        for the reason given."""
        ordered = list(dict.fromkeys(methods))
        self._methods = frozenset(ordered)
        # A bare name served by two APIs (GetInboxIds) means the first listed, the V3
        # one; the D14N one is named by its full path.
        self._by_name: dict[str, str] = {}
        for path in ordered:
            self._by_name.setdefault(path.rsplit("/", 1)[-1], path)
        self._drop_streams = drop_streams
        self._failures: dict[str, _Failure] = {}
        self._group_failures: dict[bytes, _Failure] = {}
        self._latency_s: dict[str, float] = {}
        self._held: Counter[str] = Counter()
        self._cutover_ns = NO_CUTOVER_NS
        self._cutover_timer: asyncio.TimerHandle | None = None

    @property
    def methods(self) -> frozenset[str]:
        """The full paths of every method faults can be injected into."""
        return self._methods

    def resolve(self, method: str) -> str:
        """The full path of a method given by full path or bare name."""
        if method in self._methods:
            return method
        if method in self._by_name:
            return self._by_name[method]
        raise InvalidArgument(
            f"unknown method {method!r}: use a bare name such as 'SendGroupMessages' "
            "or a full path such as '/xmtp.mls.api.v1.MlsApi/SendGroupMessages' "
            "(a D14N method shared by name with V3, such as GetInboxIds, by its full path)",
            field="method",
        )

    def fail_next(
        self, method: str, count: int, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE,
        message: str = "",
    ) -> str:  # fmt: skip
        """Fail the method's next `count` calls with `code` (0 cancels); returns its path."""
        path = self.resolve(method)
        if code is grpc.StatusCode.OK:
            raise InvalidArgument("a failure needs a status code other than OK", field="code")
        if count <= 0:
            self._failures.pop(path, None)
        else:
            text = message or f"injected failure ({code.name}) by the devnet's fault injection"
            self._failures[path] = _Failure(count, code, text)
        return path

    def set_latency(self, method: str, seconds: float) -> str:
        """Delay each later call of the method by `seconds` (0 removes); returns its path."""
        path = self.resolve(method)
        if seconds < 0:
            raise InvalidArgument("latency cannot be negative", field="latency")
        if seconds == 0:
            self._latency_s.pop(path, None)
        else:
            self._latency_s[path] = seconds
        return path

    def drop_streams(self) -> int:
        """End every open stream now with UNAVAILABLE; returns how many were open."""
        return self._drop_streams(EndReason.DROPPED)

    @property
    def cutover_ns(self) -> int:
        """The cutover time in Unix nanoseconds (`NO_CUTOVER_NS` while none is set)."""
        return self._cutover_ns

    @property
    def v3_cutover(self) -> bool:
        """Whether the cutover time has passed (checked at every call, as node-go does)."""
        return time.time_ns() >= self._cutover_ns

    def set_cutover(self, at_ns: int | None) -> int:
        """Set the cutover time in Unix nanoseconds (None: none, V3 serves publishes
        again). From then on the V3 side answers as xmtp-node-go after its
        `--api.d14n-cutover-ns`: publishes and new subscriptions fail with UNAVAILABLE
        and node-go's text, reads keep working, and open V3 streams end (at once
        for a time already past, when the time comes otherwise: node-go's
        periodic check ends them within 5 s). Returns how many streams were ended now."""
        if self._cutover_timer is not None:
            self._cutover_timer.cancel()
            self._cutover_timer = None
        self._cutover_ns = NO_CUTOVER_NS if at_ns is None else min(at_ns, NO_CUTOVER_NS)
        if self._cutover_ns >= NO_CUTOVER_NS:
            return 0
        wait_s = (self._cutover_ns - time.time_ns()) / 1e9
        if wait_s <= 0:
            return self._drop_streams(EndReason.V3_CUTOVER)
        # No loop yet (a Devnet set up before start()): no stream can be open, and
        # start() sets the time again on its loop.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return 0
        self._cutover_timer = loop.call_later(wait_s, self._drop_streams, EndReason.V3_CUTOVER)
        return 0

    def set_v3_cutover(self, on: bool) -> int:
        """Cut over now (or set no cutover): `set_cutover(now)` or `set_cutover(None)`.
        Returns how many streams were ended."""
        return self.set_cutover(time.time_ns() if on else None)

    def cutover_refusal(self, method: str) -> str | None:
        """The refusal text for a call of `method` while the cutover is on, or None."""
        if not self.v3_cutover:
            return None
        if method in V3_PUBLISH_METHODS:
            return V3_PUBLISH_REFUSED
        if method in V3_SUBSCRIBE_METHODS:
            return EndReason.V3_CUTOVER.value
        return None

    def fail_group(
        self, group_id: bytes, count: int, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    ) -> None:
        """Fail the next `count` SendGroupMessages (or D14N PublishClientEnvelopes)
        calls that carry a message of one group (0 cancels): publication fails for
        that conversation only."""
        if code is grpc.StatusCode.OK:
            raise InvalidArgument("a failure needs a status code other than OK", field="code")
        if count <= 0:
            self._group_failures.pop(group_id, None)
        else:
            text = f"injected failure ({code.name}) for group {group_id.hex()}"
            self._group_failures[group_id] = _Failure(count, code, text)

    def take_group_failure(self, group_ids: Iterable[bytes]) -> tuple[grpc.StatusCode, str] | None:
        """Consume one pending failure of the first failing group among `group_ids`."""
        for group_id in group_ids:
            failure = self._group_failures.get(group_id)
            if failure is not None:
                failure.remaining -= 1
                if failure.remaining <= 0:
                    del self._group_failures[group_id]
                return failure.code, failure.message
        return None

    def clear(self) -> None:
        """Remove every pending failure and latency, and the cutover."""
        self._failures.clear()
        self._group_failures.clear()
        self._latency_s.clear()
        self.set_cutover(None)

    def latency(self, method: str) -> float:
        """The delay to apply to a call of the method, in seconds."""
        return self._latency_s.get(method, 0.0)

    async def delay(self, method: str) -> None:
        """Wait out the latency injected into a call of the method, if any."""
        seconds = self.latency(method)
        if not seconds:
            return
        self._held[method] += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            self._held[method] -= 1

    def held(self, method: str) -> int:
        """How many calls of the method wait out their injected latency now (a test
        waits on it, not on a guess of when a call has reached the node)."""
        return self._held[self.resolve(method)]

    def take_failure(self, method: str) -> tuple[grpc.StatusCode, str] | None:
        """Consume one pending failure of the method, if any."""
        failure = self._failures.get(method)
        if failure is None:
            return None
        failure.remaining -= 1
        if failure.remaining <= 0:
            del self._failures[method]
        return failure.code, failure.message
