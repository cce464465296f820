"""The V3 cutover as one engine meets it.

libxmtp 1.10 is an XMTP V3 client. When its node cuts over to D14N, the node refuses
its publications and new subscriptions. `Cutover` notices that (a refused call, a
failing stream, or the time the node announces) and, when cone knows a D14N gateway
for the network, has the engine move there over the same database, retrying until the
move is done. Without a gateway it reports the state once, loudly, for status.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from cone import _failpoints
from cone.engine._calls import answered
from cone.engine._errors import cutover_refusal, is_v3_cutover
from cone.engine._probe import cutover_ns, refuses_v3
from cone.errors import V3_CUTOVER, ConeError, StateError, Unavailable

log = logging.getLogger(__name__)

# At most one direct cutover probe this often for failing streams (publishes that
# fail always probe: they are rare and slow already).
PROBE_EVERY_S: Final = 60.0
# Between attempts to move to D14N when reopening libxmtp there fails (seconds).
SWITCH_RETRY_S: Final = 30.0


class Cutover:
    """Whether the node refuses this V3 client, and the move to D14N when it does."""

    def __init__(self, api_url: str, *, on_d14n: bool) -> None:
        self.api_url = api_url
        #: Whether libxmtp already runs on D14N (there is no cutover left to meet).
        self.on_d14n = on_d14n
        #: The node refused this client as a V3 client since it last accepted one.
        self.refused = False
        self._probed_at = -PROBE_EVERY_S
        self._probes: set[asyncio.Task[bool]] = set()
        self._gateway: str | None = None
        self._move: Callable[[], Awaitable[None]] | None = None
        self._on_moved: Callable[[], Awaitable[None]] | None = None
        self._switching: asyncio.Task[None] | None = None
        self._watching: asyncio.Task[None] | None = None

    def can_move(self, gateway: str, move: Callable[[], Awaitable[None]]) -> None:
        """At the cutover, `move` libxmtp to D14N through `gateway`: it reopens the
        client there and swaps it in, raising ConeError to be tried again later, or
        StateError when moving cannot help."""
        self._gateway, self._move = gateway, move

    def on_moved(self, handler: Callable[[], Awaitable[None]]) -> None:
        """Have `handler` run once the move is done."""
        self._on_moved = handler

    def noted(self, err: ConeError) -> None:
        """Every translated libxmtp error passes here: the V3 cutover is seen."""
        if err.reason == V3_CUTOVER:
            self._saw()

    def accepted(self) -> None:
        """The node accepted a publication: it does not refuse this client."""
        self.refused = False

    async def unless_refused(self, err: Unavailable, doing: str) -> ConeError:
        """The error for a failed publication: the V3 cutover when the node refuses
        this client. libxmtp 1.10 reports that refusal only as "Sync failed to wait
        for intent", so the node is asked directly; a call that overran its bound is
        reported as it is."""
        if answered(err) and (self.refused or await self._probe()):
            return cutover_refusal(doing)
        return err

    def stream_error(self, error: str) -> None:
        """A stream failed with `error`."""
        if is_v3_cutover(error):
            self._saw()
        elif not self.refused and time.monotonic() - self._probed_at >= PROBE_EVERY_S:
            # A subscription refused after the cutover closes without the text.
            task = asyncio.get_running_loop().create_task(self._probe())
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)

    def watch(self) -> None:
        """When this client can move, ask the node when it cuts over and move then."""
        if self._move is not None and self._watching is None:
            self._watching = asyncio.get_running_loop().create_task(
                self._watch(), name="cutover-watch"
            )

    async def close(self) -> None:
        """Stop probing, watching and moving."""
        tasks = [*self._probes, *(t for t in (self._switching, self._watching) if t)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _probe(self) -> bool:
        self._probed_at = time.monotonic()
        # On D14N there is no V3 node to ask (and no V3 cutover to meet).
        if not self.on_d14n and await refuses_v3(self.api_url):
            self._saw()
        return self.refused

    def _saw(self) -> None:
        if self.on_d14n:
            return  # a late answer to the V3 client the engine has left
        if self._move is not None:
            self.refused = True
            if self._switching is None or self._switching.done():
                self._switching = asyncio.get_running_loop().create_task(
                    self._switch_until_done(), name="d14n-switch"
                )
            return
        if not self.refused:
            self.refused = True
            log.error(
                "the XMTP node at %s has cut over to XMTP's decentralized network (D14N) "
                "and refuses publishes and new subscriptions from this cone (libxmtp 1.10, "
                "an XMTP V3 client). Sends wait in the outbox and fail with reason "
                "v3_cutover; what the node holds can still be read. cone knows no D14N "
                "gateway for this network, so it cannot move there by itself: to send "
                "again, restart this identity with --gateway-url (CONE_GATEWAY_URL: its "
                "network's gateway), or point --network/--api-url at a node that still "
                "serves V3 (docs/networks.md).",
                self.api_url or "?",
            )

    async def _switch_until_done(self) -> None:
        assert self._move is not None
        while True:
            log.warning(
                "the XMTP node at %s has cut over to XMTP's decentralized network (D14N): "
                "moving this identity to D14N through the gateway at %s, on the same "
                "databases",
                self.api_url,
                self._gateway,
            )
            try:
                await self._move()
                break
            except StateError as exc:  # another installation: moving cannot help
                log.error("not moving to D14N: %s", exc)
                return
            except ConeError as exc:
                log.warning(
                    "moving to D14N through the gateway at %s failed (%s); trying again in %.0f s",
                    self._gateway,
                    exc,
                    SWITCH_RETRY_S,
                )
            await asyncio.sleep(SWITCH_RETRY_S)
        self.on_d14n, self.refused, self._move = True, False, None
        log.warning("this identity now runs on D14N through the gateway at %s", self._gateway)
        await _failpoints.reached("d14n_swapped")  # moved but not recorded: moves again
        if self._on_moved is not None:
            try:
                await self._on_moved()
            except Exception:  # the task's boundary: the move itself is done
                log.exception("recording the move to D14N failed; the next start moves again")

    async def _watch(self) -> None:
        """Ask the node when it cuts over (FetchD14nCutover) and move at that time."""
        while not self.on_d14n:
            at = await cutover_ns(self.api_url)
            now = time.time_ns()
            if at is not None and now >= at:
                self._saw()
                return
            wait = PROBE_EVERY_S if at is None else min(PROBE_EVERY_S, (at - now) / 1e9)
            await asyncio.sleep(max(wait, 0.1))
