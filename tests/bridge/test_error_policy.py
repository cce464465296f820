"""The bridge's loop against a scripted core: which failures it retries, which stop it.

Pure loop logic (the core is a script, the command and the journal are real); the
real-process cases are in test_failures.py (a reply too large for gRPC parks at once).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from cone.bridge import Bridge, BridgeConfig, Journal
from cone.errors import ConeError, NotFound, Unavailable
from conepb.v1 import cone_pb2 as pb


class _Core:
    """One pending DM message; Ack answers from `ack_errors` in turn, then succeeds."""

    def __init__(self, ack_errors: list[ConeError]) -> None:
        self.ack_errors = ack_errors
        self.calls: list[str] = []
        #: The consumer of each Ack (a DM turn also acks on the context consumer).
        self.acks: list[str] = []
        self.acked = asyncio.Event()

    def _pending(self, request: pb.ReceiveRequest) -> bool:
        excluded = "cc" * 16 in request.exclude_conversation_ids
        return not self.acked.is_set() and not excluded

    async def call(self, rpc: str, request: Any, timeout: float | None = None) -> Any:
        self.calls.append(rpc)
        if rpc == "Ack":
            self.acks.append(request.consumer)
        if rpc == "Receive" and request.consumer == "bridge" and self._pending(request):
            message = pb.Message(
                message_id="aa" * 32,
                conversation_id="cc" * 16,
                conversation_type=pb.CONVERSATION_TYPE_DM,
                sender_inbox_id="bb" * 32,
                content_type="xmtp.org/text:1.0",
                text="hi",
                sequence=1,
                deliveries=1,
            )
            return pb.ReceiveResponse(messages=[message])
        if rpc == "Receive":
            await asyncio.sleep(request.wait_ms / 1000)  # a long poll that finds nothing
            return pb.ReceiveResponse()
        if rpc == "Ack" and request.consumer == "bridge":
            if self.ack_errors:
                raise self.ack_errors.pop(0)
            self.acked.set()
        return pb.AckResponse(acknowledged=len(request.message_ids))


def _bridge(tmp_path: Path, core: _Core) -> tuple[Bridge, Journal]:
    journal = Journal(tmp_path, "bridge")
    journal.acquire()
    config = BridgeConfig(argv=[sys.executable, "-c", "pass"], backoff_s=0.01)
    return Bridge(core, config, journal, {"inboxId": "me"}), journal


async def test_a_deterministic_ack_failure_stops_the_bridge_once_with_that_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    refused = NotFound("1 message id(s) are not in the inbox", reason="unknown_message")
    core = _Core([refused])
    bridge, journal = _bridge(tmp_path, core)
    try:
        with pytest.raises(NotFound) as err:
            await asyncio.wait_for(bridge.run(asyncio.Event()), 30)
    finally:
        journal.release()
    assert err.value is refused
    assert core.acks.count("bridge") == 1  # not retried, and the turn did not run again
    assert sum("stopping" in r.getMessage() for r in caplog.records) == 1


async def test_a_transient_ack_failure_is_retried_until_it_succeeds(tmp_path: Path) -> None:
    core = _Core([Unavailable("the daemon is restarting", reason="daemon_unavailable")] * 2)
    bridge, journal = _bridge(tmp_path, core)
    stop = asyncio.Event()
    running = asyncio.create_task(bridge.run(stop))
    try:
        await asyncio.wait_for(core.acked.wait(), 30)
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
        journal.release()
    assert core.calls.count("Ack") >= 3
