"""The MCP server: the SDK's low-level Server with tools from the shared schema.

The low-level Server rather than `MCPServer`'s typed functions: the tools are built
from `cone.schema` at run time (closed input schemas, output schemas, one definition
shared with JSON-RPC), which typed Python signatures would have to copy by hand.
The lifespan reaches the core (relay or embed, `cone.startup`) and hands the
channel pool to every call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

import cone
from cone.facades.jsonrpc import Caller
from cone.facades.mcp._tools import INSTRUCTIONS, call_tool, tool_definitions

Lifespan = Callable[[Server[Caller]], AbstractAsyncContextManager[Caller]]


def build_server(lifespan: Lifespan) -> Server[Caller]:
    """The `cone` MCP server; `lifespan` yields what calls go through."""

    async def list_tools(
        ctx: ServerRequestContext[Caller], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_definitions())

    async def on_call_tool(
        ctx: ServerRequestContext[Caller], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await call_tool(ctx.lifespan_context, params.name, params.arguments)

    server: Server[Caller] = Server(
        "cone",
        version=getattr(cone, "__version__", "0.1.0"),
        title="cone: durable encrypted XMTP messaging",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        get_tool_input_schema=_input_schema,
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
    )
    # The SDK's default OpenTelemetry middleware costs a span per message and exports
    # nowhere unless the host installs an exporter; cone does not.
    server.middleware = []
    return server


def _input_schema(name: str) -> dict[str, Any] | None:
    from cone.schema import tools

    method = tools().get(name)
    return None if method is None else method.params_schema


def fixed_lifespan(caller: Caller) -> Lifespan:
    """A lifespan that hands out `caller` (tests, or a caller made elsewhere)."""

    @asynccontextmanager
    async def lifespan(server: Server[Caller]) -> AsyncIterator[Caller]:
        yield caller

    return lifespan


__all__ = ["build_server", "fixed_lifespan"]
