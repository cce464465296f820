"""A waiting receive is served inside the commit that stores a streamed message."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from cone.core.model import Message
from cone.core.service import Core
from cone.engine.port import XmtpConsent
from cone.store import inbox
from support.fake_engine import FakeEngine
from support.waiting import until

WAIT_S = 10.0


@pytest.fixture
async def streaming(core: Core) -> AsyncIterator[Core]:
    """The core with its ingest worker running (what the stream's messages go to)."""
    await core.intake.ingestor.start()
    yield core
    await core.intake.ingestor.stop()


async def _waiting(core: Core, n: int = 1) -> None:
    """Until `n` receives wait on the core (registered for the next commit)."""

    async def registered() -> bool:
        return len(core.receiving.waiters.waiting()) >= n

    await until(registered, WAIT_S)


def _record_writes(core: Core) -> list[str]:
    """The names of the store functions written from now on."""
    names: list[str] = []
    write = core.store.write

    async def spy(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        names.append(fn.__name__)
        return await write(fn, *args, **kwargs)

    core.store.write = spy  # type: ignore[method-assign]  # a spy on the instance
    return names


async def _accepted_dm(core: Core, engine: FakeEngine, name: str) -> tuple[str, str]:
    _, inbox_id = engine.peer(name)
    cid = engine.dm(inbox_id, XmtpConsent.ALLOWED)
    await core.intake.ingestor.ingest([cid])  # cone records it, accepted
    return cid, inbox_id


async def test_a_waiting_receive_gets_a_streamed_message_from_the_commit_that_stores_it(
    streaming: Core, engine: FakeEngine
) -> None:
    core = streaming
    cid, alice = await _accepted_dm(core, engine, "alice")
    poll = asyncio.create_task(core.receiving.receive("bot", None, 30_000, []))
    await _waiting(core)
    writes = _record_writes(core)
    looked_up: list[str] = []
    conversation = engine.conversation

    async def counting(conversation_id: str) -> Any:
        looked_up.append(conversation_id)
        return await conversation(conversation_id)

    engine.conversation = counting  # type: ignore[method-assign]  # a spy on the instance

    core.intake.ingestor.accept(engine.incoming(cid, alice, "hello"))
    messages, more = await asyncio.wait_for(poll, WAIT_S)

    assert [(m.text, m.deliveries) for m in messages] == [("hello", 1)] and not more
    # One write transaction stored it and took the batch: no second one for the
    # receive, and no libxmtp lookup of a conversation cone records already.
    assert writes == ["_commit_if_recorded"] and looked_up == []
    # Handed out only once committed: it is in the store, pending until acked.
    assert await core.store.read(inbox.message_count) == 1
    again, _ = await core.receiving.receive("bot", None, 0, [])
    assert [(m.text, m.deliveries) for m in again] == [("hello", 2)]


async def test_a_receive_leaving_the_conversation_out_is_not_served_and_keeps_waiting(
    streaming: Core, engine: FakeEngine
) -> None:
    core = streaming
    busy, alice = await _accepted_dm(core, engine, "alice")
    other, bob = await _accepted_dm(core, engine, "bob")
    poll = asyncio.create_task(core.receiving.receive("bot", None, 30_000, [busy]))
    await _waiting(core)

    core.intake.ingestor.accept(engine.incoming(busy, alice, "not now"))

    async def stored() -> bool:
        return await core.store.read(inbox.message_count) >= 1

    await until(stored, WAIT_S)
    await _waiting(core)  # still waiting, on a fresh registration
    assert not poll.done()

    core.intake.ingestor.accept(engine.incoming(other, bob, "now"))
    messages, _ = await asyncio.wait_for(poll, WAIT_S)
    assert [m.text for m in messages] == ["now"]


async def test_a_receive_that_gives_up_while_the_commit_runs_leaves_the_message_pending(
    streaming: Core, engine: FakeEngine
) -> None:
    core = streaming
    cid, alice = await _accepted_dm(core, engine, "alice")
    poll = asyncio.create_task(core.receiving.receive("bot", None, 30_000, []))
    await _waiting(core)
    # Hold the store's one thread: the commit (with this waiter in it) queues behind.
    held, release = threading.Event(), threading.Event()

    def hold(conn: object) -> None:
        held.set()
        release.wait(WAIT_S)

    core.store.write_soon(hold)
    await asyncio.to_thread(held.wait, WAIT_S)
    core.intake.ingestor.accept(engine.incoming(cid, alice, "late"))

    async def taken() -> bool:  # by the worker: its commit is queued
        return not core.intake.ingestor._streamed

    await until(taken, WAIT_S)
    poll.cancel()  # the receive gives up before the commit answers
    release.set()

    with pytest.raises(asyncio.CancelledError):
        await poll

    async def pending() -> list[Message]:
        return (await core.receiving.receive("bot", None, 0, []))[0]

    messages = await until(pending, WAIT_S)
    assert [m.text for m in messages] == ["late"]  # pending still: nothing was lost
    assert not core.intake.ingestor._failing  # and ingest took the late answer in its stride
