"""The routes: JSON-RPC, the event stream, health, metrics and the web console. No logic of their own:
each is a JSON-RPC method of `cone.facades.jsonrpc`'s relay, reached the same way."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cone import metrics
from cone.commands._render import problems
from cone.errors import ConeError
from cone.facades.http import _console, _guard, _params
from cone.facades.jsonrpc import Dispatcher, Relay
from cone.facades.jsonrpc._errors import error_object

log = logging.getLogger(__name__)

EVENTS_BATCH: Final = 100
DEFAULT_CONSUMER: Final = "default"
PROMETHEUS_TEXT: Final = "text/plain; version=0.0.4; charset=utf-8"


class Routes:
    """The handlers, over one relay."""

    def __init__(self, relay: Relay, authorized: Any) -> None:
        self.relay = relay
        self.authorized = authorized

    def add_to(self, app: web.Application) -> None:
        """Register every route on `app`."""
        app.router.add_post("/api/v1/rpc", self.rpc)
        app.router.add_get("/api/v1/events", self.events)
        app.router.add_get("/api/v1/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        _console.add_to(app)

    # ---- JSON-RPC -----------------------------------------------------------------------

    async def rpc(self, request: web.Request) -> web.StreamResponse:
        """One JSON-RPC request or batch per POST; the answer is the response body
        (204 for notifications only). A client that goes away cancels its calls."""
        if request.content_type != "application/json":
            return web.json_response(
                {"error": "send JSON-RPC as Content-Type: application/json"}, status=415
            )
        try:
            async with asyncio.timeout(_guard.BODY_TIMEOUT_S):
                body = await request.read()
        except TimeoutError:
            return web.json_response(
                {"error": f"the body did not arrive within {_guard.BODY_TIMEOUT_S:g} s"},
                status=408,
                headers={"Connection": "close"},
            )
        out: list[bytes] = []

        async def write(line: bytes) -> None:
            out.append(line)

        dispatcher = Dispatcher(self.relay, write)
        try:
            await dispatcher.feed(body)
            await dispatcher.close()
        except BaseException:
            await dispatcher.abort()  # cancelled: the client went away
            raise
        if not out:
            return web.Response(status=204)
        return web.Response(body=out[0], content_type="application/json")

    # ---- events -------------------------------------------------------------------------

    async def events(self, request: web.Request) -> web.StreamResponse:
        """Server-Sent Events: the consumer's unacknowledged messages, then new ones.

        Each `message` event is one message in `receive`'s shape, with its `sequence`
        as the event id; a reconnect with `Last-Event-ID` resumes after it. Messages
        stay pending until acknowledged with `ack` (a reconnect without the header
        starts again from the oldest unacknowledged). A comment line every heartbeat,
        or an `inbox` event (no id) when the inbox's head moved without a message for
        this stream (a request's message, or one already acknowledged): a client that
        shows requests reads them again then.
        """
        consumer = request.query.get("consumer") or DEFAULT_CONSUMER
        try:
            heartbeat = _params.heartbeat(request.query.get("heartbeat"))
            cursor = _params.cursor(
                request.headers.get("Last-Event-ID"), request.query.get("lastEventId")
            )
        except _params.BadParameter as err:
            return web.json_response({"error": str(err)}, status=400)
        try:
            first = await self._peek(consumer, cursor, wait_s=0)
        except ConeError as err:
            status = 400 if err.jsonrpc_code in (-32602, -32600) else 503
            return web.json_response({"error": error_object(err)}, status=status)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        try:
            await response.write(b"retry: 1000\n\n")
            batch = first
            head = int(first.get("headSequence", 0))
            while True:
                for message in batch["messages"]:
                    data = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
                    await response.write(
                        f"id: {message['sequence']}\nevent: message\ndata: {data}\n\n".encode()
                    )
                    cursor = int(message["sequence"])
                moved = int(batch.get("headSequence", 0))
                if not batch["messages"] and moved > head:
                    data = json.dumps({"headSequence": moved}, separators=(",", ":"))
                    await response.write(f"event: inbox\ndata: {data}\n\n".encode())
                elif not batch["messages"]:
                    await response.write(b": heartbeat\n\n")
                head = max(head, moved)
                try:
                    batch = await self._peek(consumer, cursor, wait_s=heartbeat)
                except ConeError as err:
                    # The daemon is stopping (or the core failed): say so and end; the
                    # client reconnects with Last-Event-ID.
                    data = json.dumps(error_object(err), separators=(",", ":"))
                    await response.write(f"event: error\ndata: {data}\n\n".encode())
                    break
        except ConnectionError:
            pass  # the client went away
        return response

    async def _peek(self, consumer: str, cursor: int | None, wait_s: float) -> dict[str, Any]:
        params: dict[str, Any] = {
            "consumer": consumer,
            "limit": EVENTS_BATCH,
            "waitMs": int(wait_s * 1000),
        }
        if cursor is not None:
            params["afterSequence"] = cursor
        return await self.relay("peek", params)

    # ---- health and metrics -------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        """200 when `cone status` would exit 0, else 503; the reasons only with the token."""
        try:
            trouble = problems(await self.relay("status", {}))
        except ConeError as err:
            trouble = [f"the core does not answer: {err.message}"]
        body: dict[str, Any] = {"healthy": not trouble}
        if self.authorized(request):
            body["problems"] = trouble
        return web.json_response(body, status=503 if trouble else 200)

    async def metrics(self, request: web.Request) -> web.Response:
        """Prometheus text: `cone.metrics` and the state `status` reports now."""
        try:
            status: dict[str, Any] | None = await self.relay("status", {})
        except ConeError as err:
            log.info("metrics: status failed: %s", err.message)
            status = None
        scrape = CollectorRegistry(auto_describe=False)
        scrape.register(_StatusCollector(status))
        body = generate_latest(metrics.REGISTRY) + generate_latest(scrape)
        return web.Response(body=body, headers={"Content-Type": PROMETHEUS_TEXT})


_NETWORK_STATES: Final = ("reachable", "unreachable", "v3_cutover")

#: The `reason` labels of cone_outbox_failing, always exported (0 when none fail):
#: the reason codes an outbox failure carries (`lastReason`); anything else, such as
#: an entry whose failure was recorded before the store kept reasons, counts as `other`.
OUTBOX_REASONS: Final = (
    "v3_cutover",
    "identity_unknown",
    "rate_limited",
    "storage_full",
    "network_unavailable",
    "other",
)


def outbox_reason(last_reason: str | None) -> str:
    """The `reason` label of a failing outbox entry (one of OUTBOX_REASONS)."""
    return last_reason if last_reason in OUTBOX_REASONS else "other"


class _StatusCollector(Collector):
    """Gauges and counters read from one `status` answer (none but cone_up without it)."""

    def __init__(self, status: dict[str, Any] | None) -> None:
        self.status = status

    def collect(self) -> list[Metric]:
        up = GaugeMetricFamily("cone_up", "1 when the core answered status for this scrape.")
        up.add_metric([], 1 if self.status is not None else 0)
        if self.status is None:
            return [up]
        s = self.status
        out: list[Metric] = [up]
        healed = CounterMetricFamily(
            "cone_ingest_healed",
            "Messages the ingest reconciliation found missing and ingested (store's life).",
        )
        healed.add_metric([], int(s.get("ingestHealed", 0)))
        dropped = CounterMetricFamily(
            "cone_requests_dropped",
            "Messages of requests dropped over the request budget (store's life).",
        )
        dropped.add_metric([], int(s.get("requestsDropped", 0)))
        inbox = GaugeMetricFamily("cone_inbox_messages", "Messages in the inbox.")
        inbox.add_metric([], int(s.get("inboxMessages", 0)))
        requests = GaugeMetricFamily("cone_requests", "Conversations held as requests.")
        requests.add_metric([], int(s.get("requests", 0)))
        outbox = GaugeMetricFamily(
            "cone_outbox_messages", "Unsettled outgoing messages, by state.", labels=["state"]
        )
        states = {"pending": 0, "failing": 0}
        for entry in s.get("outbox", []):
            states[str(entry.get("state", "pending"))] = states.get(entry.get("state"), 0) + 1
        for state, count in sorted(states.items()):
            outbox.add_metric([state], count)
        failing = GaugeMetricFamily(
            "cone_outbox_failing",
            "Outgoing messages whose last publication failed, by reason.",
            labels=["reason"],
        )
        reasons = dict.fromkeys(OUTBOX_REASONS, 0)
        for entry in s.get("outbox", []):
            if entry.get("state") == "failing":
                reasons[outbox_reason(entry.get("lastReason"))] += 1
        for reason, count in reasons.items():
            failing.add_metric([reason], count)
        pending = GaugeMetricFamily(
            "cone_consumer_pending", "Accepted messages not acknowledged.", labels=["consumer"]
        )
        for c in s.get("consumers", []):
            pending.add_metric([str(c["consumer"])], int(c.get("pending", 0)))
        connected = GaugeMetricFamily(
            "cone_stream_connected", "1 while the libxmtp stream is open.", labels=["stream"]
        )
        restarts = CounterMetricFamily(
            "cone_stream_restarts", "Restarts of the libxmtp stream.", labels=["stream"]
        )
        for stream in s.get("streams", []):
            connected.add_metric([stream["name"]], 1 if stream.get("connected") else 0)
            restarts.add_metric([stream["name"]], int(stream.get("restarts", 0)))
        network = GaugeMetricFamily(
            "cone_network_state", "1 for the network's state as last seen.", labels=["state"]
        )
        current = str(s.get("networkState", "")).lower().removeprefix("network_state_")
        for state in _NETWORK_STATES:
            network.add_metric([state], 1 if state == current else 0)
        out += [
            healed,
            dropped,
            inbox,
            requests,
            outbox,
            failing,
            pending,
            connected,
            restarts,
            network,
        ]
        return out


__all__ = ["Routes"]
