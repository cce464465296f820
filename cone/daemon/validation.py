"""The one check of every request's rules, for every transport, at the gRPC edge.

`broken` runs `cone.rules.check` on each ConeService request before any servicer code
runs (cone/daemon/edge.py builds it into every method). JSON-RPC and MCP reach the
core through this same server (a relay over the daemon's socket, or the core they
host in-process serving that socket), and so do the CLI and the bridge: every surface
gets the same verdict.
"""

from __future__ import annotations

from typing import Any

from cone.errors import ConeError
from cone.rules import check


def broken(request: Any) -> ConeError | None:
    """The INVALID_ARGUMENT a request that breaks its proto's rules gets; None when
    it keeps them."""
    try:
        check(request)
    except ConeError as err:
        return err
    return None


__all__ = ["broken"]
