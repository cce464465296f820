"""Server-side timing: calls and time per method, and per streamed delivery."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class MethodTotals:
    """Completed calls of one method and the server time they took."""

    calls: int = 0
    total_ns: int = 0


@dataclass(slots=True)
class Stats:
    """What the devnet spent, since it started."""

    methods: dict[str, MethodTotals] = field(default_factory=dict)
    #: Streams opened, by method path.
    streams: dict[str, int] = field(default_factory=dict)
    deliveries: int = 0
    delivery_total_ns: int = 0

    def record_call(self, method: str, elapsed_ns: int) -> None:
        """Count one completed unary call."""
        totals = self.methods.get(method)
        if totals is None:
            totals = self.methods[method] = MethodTotals()
        totals.calls += 1
        totals.total_ns += elapsed_ns

    def record_stream(self, method: str) -> None:
        """Count one stream opened."""
        self.streams[method] = self.streams.get(method, 0) + 1

    def record_delivery(self, elapsed_ns: int) -> None:
        """Count one message or welcome written to a stream."""
        self.deliveries += 1
        self.delivery_total_ns += elapsed_ns

    def mean_ns(self, method: str) -> float:
        """Mean server time of the method's calls (0 when never called)."""
        totals = self.methods.get(method)
        return totals.total_ns / totals.calls if totals and totals.calls else 0.0

    def mean_delivery_ns(self) -> float:
        """Mean server time of a streamed delivery (0 when none)."""
        return self.delivery_total_ns / self.deliveries if self.deliveries else 0.0
