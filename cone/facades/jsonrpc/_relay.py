"""Handlers: one generic relay for every method, from the shared schema to the core.

No logic of its own: look the method up, check and convert the params with its schema
(`cone.schema`), call the RPC, convert the response.
"""

from __future__ import annotations

from typing import Any, Protocol

from cone.facades.jsonrpc._errors import InvalidParams, MethodNotFound
from cone.schema import JsonObject, methods


class Caller(Protocol):
    """What the relay calls through: a ChannelPool, the core in process
    (cone/daemon/in_process.py), or a fake in unit tests."""

    async def call(
        self, rpc: str, request: Any, timeout: float | None = None, *, long_poll: bool = False
    ) -> Any: ...


class Relay:
    """The JSON-RPC handler: `await relay(method, params)` → result object."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self.methods = methods()

    async def __call__(self, method: str, params: Any) -> JsonObject:
        spec = self.methods.get(method)
        if spec is None:
            raise MethodNotFound(f"unknown method {method!r}; methods: {', '.join(self.methods)}")
        if isinstance(params, list):
            if params:
                raise InvalidParams("params must be an object of named parameters")
            params = None
        elif params is not None and not isinstance(params, dict):
            raise InvalidParams("params must be an object of named parameters")
        request = spec.to_request(params)
        response = await self.caller.call(
            spec.rpc, request, timeout=spec.timeout(request), long_poll=spec.long_poll
        )
        return spec.to_result(response)

    def cancel_at_close(self, method: str) -> bool:
        """Long polls (receive) are cancelled when input ends; the rest finish."""
        spec = self.methods.get(method)
        return spec is not None and spec.long_poll


__all__ = ["Caller", "Relay"]
