"""Waiting on conditions under a timeout, never on fixed sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from cone.client import ConeClient
from conepb.v1 import cone_pb2 as pb

T = TypeVar("T")
WAIT_S = 60.0


async def until(probe: Callable[[], Awaitable[T]], timeout: float = WAIT_S) -> T:
    """Call `probe` until it returns something truthy; return that."""
    async with asyncio.timeout(timeout):
        while True:
            value = await probe()
            if value:
                return value
            await asyncio.sleep(0.05)


def parked(task: asyncio.Task[Any]) -> bool:
    """Whether `task` is waiting on an `asyncio.Event` (a worker between its turns),
    read from the chain of coroutines it awaits."""
    coro: Any = task.get_coro()
    while coro is not None:
        code = getattr(coro, "cr_code", None)
        if code is asyncio.Event.wait.__code__:
            return True
        coro = getattr(coro, "cr_await", None)
    return False


async def until_parked(*tasks: asyncio.Task[Any], timeout: float = WAIT_S) -> None:
    """Wait until every task waits on an event: each worker idle until woken."""

    async def all_parked() -> bool:
        return all(parked(t) for t in tasks)

    await until(all_parked, timeout)


async def receive_n(
    client: ConeClient,
    n: int,
    consumer: str = "",
    timeout: float = WAIT_S,
    conversation: str = "",
) -> list[pb.Message]:
    """Long-poll until `n` messages are pending for the consumer (without acking);
    with `conversation`, `n` of that conversation's, and only those (a daemon shared
    by a module's tests holds the others' too)."""
    async with asyncio.timeout(timeout):
        while True:
            batch = await client.receive(consumer=consumer, limit=1000, wait_ms=2000)
            got = [
                m for m in batch.messages if m.conversation_id == conversation or not conversation
            ]
            if len(got) >= n:
                return got


async def accept_request(client: ConeClient, conversation_id: str) -> None:
    """Sync until the conversation is held as a request, then accept it."""

    async def held() -> bool:
        await client.call("Sync", pb.SyncRequest())
        requests = await client.call("Requests", pb.RequestsRequest())
        return any(r.conversation_id == conversation_id for r in requests.requests)

    await until(held)
    await client.call("Accept", pb.AcceptRequest(conversation_id=conversation_id))
