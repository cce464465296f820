"""A publication answers at the first sign the node has the message (on the engine's
in-memory `MemoryPublishing`): the key settles, or is recorded failing, afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest

from cone.core.publication import Publications
from cone.engine.roles.publishing import MemoryPublishing
from cone.errors import ConeError, Unavailable
from cone.store.outbox import OutboxRecord

CONVERSATION = "c0" * 16


def _record(key: str) -> OutboxRecord:
    return OutboxRecord(
        key=key, conversation_id=CONVERSATION, destination=CONVERSATION, content_type="text",
        payload=b"hello", message_id=None, state="pending", attempts=0, last_error=None,
        next_attempt_ns=None, created_ns=0, settled_ns=None,
    )  # fmt: skip


class Outcomes:
    """What the outbox is told: keys failing after the answer."""

    def __init__(self) -> None:
        self.failed: list[tuple[str, str, str]] = []
        self.told = asyncio.Event()

    async def fail(self, rec: OutboxRecord, message_id: str, err: ConeError) -> None:
        self.failed.append((rec.key, message_id, err.message))
        self.told.set()


async def _direct(call: Awaitable[str]) -> str:
    return await call


def _publications(publishing: MemoryPublishing, outcomes: Outcomes) -> Publications:
    return Publications(publishing, failed=outcomes.fail)


async def test_a_send_is_answered_at_the_echo_while_libxmtps_call_goes_on() -> None:
    publishing, outcomes = MemoryPublishing(hold=asyncio.Event()), Outcomes()
    publications = _publications(publishing, outcomes)
    answered = await publications.publish(_record("k1"), None, [], _direct)
    assert not answered.finished
    assert publishing.published == [answered.message_id]
    assert publishing.hold is not None
    publishing.hold.set()
    await publications.stop()
    assert outcomes.failed == []


async def test_a_call_that_returns_with_its_echo_answers_finished() -> None:
    publishing, outcomes = MemoryPublishing(), Outcomes()
    answered = await _publications(publishing, outcomes).publish(_record("k1"), None, [], _direct)
    assert answered.finished and publishing.published == [answered.message_id]


async def test_a_failure_after_the_echo_records_the_key_failing_under_its_id() -> None:
    publishing, outcomes = MemoryPublishing(hold=asyncio.Event(), fail_after=1), Outcomes()
    publications = _publications(publishing, outcomes)
    answered = await publications.publish(_record("k1"), None, [], _direct)
    assert publishing.hold is not None
    publishing.hold.set()
    async with asyncio.timeout(5):
        await outcomes.told.wait()
    assert outcomes.failed == [("k1", answered.message_id, "the memory node's read-back failed")]


async def test_a_failure_before_the_node_has_it_raises_with_the_prepared_id_known() -> None:
    publishing, outcomes = MemoryPublishing(fail=1), Outcomes()
    prepared: list[str] = []
    with pytest.raises(Unavailable):
        await _publications(publishing, outcomes).publish(_record("k1"), None, prepared, _direct)
    assert list(publishing.prepared) == prepared and publishing.published == []


async def test_a_known_message_is_published_again_under_its_id() -> None:
    publishing, outcomes = MemoryPublishing(), Outcomes()
    message_id = await publishing.prepare(CONVERSATION, b"hello")
    answered = await _publications(publishing, outcomes).publish(
        _record("k1"), message_id, [], _direct
    )
    assert answered.message_id == message_id and publishing.published == [message_id]


async def test_stopping_lets_go_of_a_call_still_finishing() -> None:
    publishing, outcomes = MemoryPublishing(hold=asyncio.Event()), Outcomes()
    publications = _publications(publishing, outcomes)
    await publications.publish(_record("k1"), None, [], _direct)
    await publications.stop()  # returns although the call is held
    assert outcomes.failed == []
