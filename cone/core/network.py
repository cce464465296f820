"""The network's state as the node tells it now: answers or not, knows this identity
or not.

`NetworkWatch` asks the node through the engine's node probe role
(cone/engine/roles/probe.py; on V3 the node at the API URL, on D14N the gateway and
then the node it names, each with the reads libxmtp makes there)
at start, every `period_s` (`min(PROBE_EVERY_S, the catch-up period)`), at each status
call (waiting at most `STATUS_PROBE_S`) and after a publication fails; after a move to
D14N it follows libxmtp there (`follow`). Status reports the latest answer, so
`networkState` is never older than the status call that shows it:

| the node (on D14N: the gateway, then the node it names) | `state` |
| --- | --- |
| answers and holds this inbox's identity updates and this installation's key package | `reachable` |
| answers but lacks either (reset, or another network) | `identity_unknown` |
| refuses the connection, no answer within the bound, or answers that it does not serve this backend's API or refuses this client | `unreachable` |

A change is logged once (not at every probe) and reported to `on_change`, which the
core uses to catch up and publish at once when the node is back or knows the
identity again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Final

from cone.engine.roles.probe import NodeAnswer, NodeView, Probes
from cone.errors import IDENTITY_UNKNOWN, FailedPrecondition

log = logging.getLogger(__name__)

#: Seconds between background probes (the catch-up period when shorter).
PROBE_EVERY_S: Final = 10.0
#: Seconds a probe may take before the node counts as not answering.
PROBE_S: Final = 5.0
#: Seconds a status call waits for its own probe.
STATUS_PROBE_S: Final = 5.0

ADVICE: Final = (
    "the node does not know this identity: node reset? wrong network? A devnet "
    "started with --ephemeral (or an older cone devnet) forgets every identity when it "
    "restarts; restart it on its state file, or point --network/--api-url at the "
    "network this identity registered on"
)


class NetworkWatch:
    """The latest answer of the node about this identity."""

    def __init__(
        self,
        probes: Probes | None,
        api_url: str = "",
        *,
        gateway_url: str | None = None,
        period_s: float = PROBE_EVERY_S,
        on_change: Callable[[NodeView, NodeView], None] | None = None,
    ) -> None:
        # No probes (a unit test's part without a node): nothing to ask.
        self._probes = probes
        self._probe = probes.node_probe(gateway_url) if probes is not None else None
        self.api_url = api_url
        self.period_s = min(period_s, PROBE_EVERY_S)
        self.on_change = on_change
        self.answer = NodeAnswer(NodeView.KNOWS_IDENTITY, "not asked yet")
        self.asked_at: float | None = None
        #: Set while the node's latest answer is that it does not know this identity.
        self.forgotten = asyncio.Event()
        # Told once when that answer comes (`when_forgotten`).
        self._on_forgotten: dict[int, Callable[[], None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._asking: asyncio.Task[NodeAnswer] | None = None

    @property
    def view(self) -> NodeView:
        """The latest answer's view."""
        return self.answer.view

    async def start(self) -> None:
        """Ask once now, then every period in the background."""
        await self.check()
        self._task = asyncio.create_task(self._watch(), name="network-watch")

    async def stop(self) -> None:
        """Stop asking and close the channel."""
        for task in (self._task, self._asking):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._probe is not None:
            await self._probe.close()

    async def follow(self, gateway_url: str) -> None:
        """Probe through `gateway_url` from now on (libxmtp moved to D14N), and ask now."""
        if self._asking is not None and not self._asking.done():
            # A question in flight (a status call may wait for it) ends within its own
            # bound; its channels close only after it.
            await asyncio.wait([self._asking])
        if self._probes is None:
            return
        old, self._probe = self._probe, self._probes.node_probe(gateway_url)
        if old is not None:
            await old.close()
        await self.check()

    async def check(self, timeout: float = PROBE_S) -> NodeAnswer:
        """Ask the node now (callers at the same time share one question)."""
        if self._probe is None:
            return self.answer
        if self._asking is None or self._asking.done():
            self._asking = asyncio.create_task(self._probe.ask(PROBE_S))
            # A caller that stopped waiting leaves the answer unread: never an
            # "exception was never retrieved" for it.
            self._asking.add_done_callback(_seen)
        try:
            async with asyncio.timeout(timeout):
                answer = await asyncio.shield(self._asking)
        except TimeoutError:
            answer = NodeAnswer(NodeView.NO_ANSWER, f"the node did not answer within {timeout:g} s")
        self._record(answer)
        return answer

    def when_forgotten(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call `fn` on the loop once the node answers that it does not know this
        identity (at once if that is its latest answer); returns what unregisters
        it. A callback, not a task waiting on `forgotten`: a publication races it
        on every send."""
        if self.forgotten.is_set():
            fn()
            return lambda: None
        handle = id(fn)
        self._on_forgotten[handle] = fn

        def unregister() -> None:
            self._on_forgotten.pop(handle, None)

        return unregister

    def require_identity(self) -> None:
        """Raise identity_unknown when the node's latest answer says it does not know
        this identity (a send would fail there for good)."""
        if self.view is NodeView.IDENTITY_UNKNOWN:
            raise identity_unknown(self.api_url, self.answer.detail)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            try:
                await self.check()
            except Exception:  # the loop's boundary: a failed probe must not end watching
                log.exception("probing the XMTP node failed unexpectedly; trying again")

    def _record(self, answer: NodeAnswer) -> None:
        before = self.answer.view
        self.answer, self.asked_at = answer, time.monotonic()
        if answer.view is NodeView.IDENTITY_UNKNOWN:
            self.forgotten.set()
            told, self._on_forgotten = self._on_forgotten, {}
            for fn in told.values():
                fn()
        else:
            self.forgotten.clear()
        if answer.view is before:
            return
        if answer.view is NodeView.IDENTITY_UNKNOWN:
            log.error("the XMTP node at %s: %s; %s", self.api_url, answer.detail, ADVICE)
        elif answer.view is NodeView.NO_ANSWER:
            log.warning("the XMTP node at %s cannot be reached: %s", self.api_url, answer.detail)
        else:
            # Good news: the node is back (or knows the identity again).
            log.info("the XMTP node at %s answers and knows this identity", self.api_url)
        if self.on_change is not None:
            self.on_change(before, answer.view)


def identity_unknown(api_url: str, detail: str) -> FailedPrecondition:
    """The error of a send to a node that does not know this identity."""
    return FailedPrecondition(
        f"the XMTP node at {api_url or '?'} does not know this identity ({detail}): node "
        "reset? wrong network? Nothing can be sent there; see `cone status`",
        reason=IDENTITY_UNKNOWN,
    )


def _seen(task: asyncio.Task[NodeAnswer]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("probing the XMTP node failed: %s", task.exception())
