"""`cone serve` as a real subprocess: write request lines, read answers.

Every line serve writes on stdout must be JSON (the test fails otherwise), which
checks that stdout carries nothing but the protocol.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from support.waiting import until

#: Seconds to wait for an answer; the first one in embed mode includes starting the core.
ANSWER_S = 60.0


class RpcError(Exception):
    """An error answer."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.code: int = error["code"]
        self.data: dict[str, Any] = error.get("data", {})
        self.error = error


class ServeProcess:
    """One `cone serve --home HOME --api-url URL` subprocess."""

    def __init__(self, home: Path, api_url: str, *extra: str) -> None:
        self.home = home
        self.args = ["--home", str(home), "--api-url", api_url, *extra]
        self.proc: asyncio.subprocess.Process | None = None
        self.log = tempfile.TemporaryFile()  # closed in close()
        self.answers: list[Any] = []  # every answer, in arrival order
        self._unclaimed: dict[Any, Any] = {}
        self._arrived = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)

    async def start(self) -> ServeProcess:
        env = {**os.environ, "CONE_CATCHUP_S": "2"}
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cone", "serve", *self.args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=self.log, env=env, limit=64 * 1024 * 1024,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            answer = json.loads(line)  # anything else on stdout is a failure
            self.answers.append(answer)
            for one in answer if isinstance(answer, list) else [answer]:
                self._unclaimed[json.dumps(one["id"])] = one
            self._arrived.set()

    def stderr(self) -> str:
        """What serve wrote on stderr so far."""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def send_raw(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(data)

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: Any = None, id_: Any = None) -> Any:
        """Send a request; returns its id."""
        id_ = next(self._ids) if id_ is None else id_
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return id_

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def cancel(self, id_: Any) -> None:
        self.notify("notifications/cancelled", {"requestId": id_})

    async def answer_to(self, id_: Any, timeout: float = ANSWER_S) -> Any:
        """The answer to request `id_`, waiting for it."""
        key = json.dumps(id_)
        async with asyncio.timeout(timeout):
            while key not in self._unclaimed:
                if self._reader is not None and self._reader.done():
                    raise AssertionError(f"serve ended without answering {id_}: {self.stderr()}")
                self._arrived.clear()
                await self._arrived.wait()
        return self._unclaimed.pop(key)

    async def next_answers(self, count: int, timeout: float = ANSWER_S) -> list[Any]:
        """Wait until `count` answers have arrived in total; return them all."""
        async with asyncio.timeout(timeout):
            while len(self.answers) < count:
                self._arrived.clear()
                await self._arrived.wait()
        return self.answers

    async def call(self, method: str, params: Any = None, timeout: float = ANSWER_S) -> Any:
        """Request and wait: the result, or RpcError."""
        answer = await self.answer_to(self.request(method, params), timeout)
        if "error" in answer:
            raise RpcError(answer["error"])
        return answer["result"]

    async def settled(self) -> None:
        """Wait until answers from the store are no longer `stale` (a fresh start's
        first sync is done: docs/guarantees.md), then forget the answers that asked."""

        async def fresh() -> bool:
            return "stale" not in await self.call("requests")

        await until(fresh, ANSWER_S)
        self.answers.clear()
        self._unclaimed.clear()

    async def close(self, timeout: float = 30.0) -> int:
        """Close stdin and wait for exit; returns the exit code."""
        assert self.proc is not None and self.proc.stdin is not None
        if not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        async with asyncio.timeout(timeout):
            code = await self.proc.wait()
            if self._reader is not None:
                await self._reader
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()

    async def __aenter__(self) -> ServeProcess:
        try:
            return await self.start()
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)  # no leaked process or log
            raise

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self.proc is not None and self.proc.returncode is None:
                try:
                    await self.close()
                except TimeoutError:
                    self.kill()
                    await self.proc.wait()
        finally:
            if self._reader is not None and not self._reader.done():
                self._reader.cancel()
            self.log.close()
