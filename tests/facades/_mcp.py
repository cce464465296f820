"""`cone mcp` driven by the official SDK's own stdio client."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def mcp_parameters(home: Path, api_url: str) -> StdioServerParameters:
    """How an MCP host would start `cone mcp` for this state directory."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "cone", "mcp", "--home", str(home), "--api-url", api_url],
        env={
            k: v for k, v in os.environ.items() if k.startswith(("CONE_", "PYTHON", "VIRTUAL_ENV"))
        },
    )


@asynccontextmanager
async def mcp_session(home: Path, api_url: str) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with `cone mcp` over stdio."""
    # The server's stderr goes to the test's (captured by pytest).
    async with stdio_client(mcp_parameters(home, api_url), errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session
