"""The MCP facade (`cone mcp`): the core's operations as MCP tools, on the official SDK.

`_tools` builds the tools from the shared schema (`cone.schema`) and runs calls;
`_server` wires them into the SDK's server; `command` is `cone mcp`. docs/mcp.md is
the reference.
"""

from cone.facades.mcp._server import build_server, fixed_lifespan
from cone.facades.mcp._tools import INSTRUCTIONS, call_tool, tool_definitions

__all__ = ["INSTRUCTIONS", "build_server", "call_tool", "fixed_lifespan", "tool_definitions"]
