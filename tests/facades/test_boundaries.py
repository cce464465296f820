"""The facades' layering: they never import the store, the core or the engine, and the
relay path of `cone serve` loads neither the core nor uvloop (a fast cold start)."""

from __future__ import annotations

from pathlib import Path

import cone
from support.imports import imported, loaded_by

PACKAGE = Path(cone.__file__).parent
FORBIDDEN = ("cone.store", "cone.core", "cone.engine")


def test_facades_and_the_schema_never_import_store_core_or_engine() -> None:
    files = [*sorted((PACKAGE / "facades").rglob("*.py")), PACKAGE / "schema.py"]
    for path in files:
        bad = sorted(n for n in imported(path) if n.startswith(FORBIDDEN))
        assert not bad, f"{path.relative_to(PACKAGE.parent)} imports {bad}"


def test_the_relay_path_loads_neither_the_core_nor_uvloop_nor_mcp() -> None:
    loaded = loaded_by(
        "import cone.cli, cone.facades.jsonrpc.command, cone.startup, cone.facades._stdio\n"
        "import cone.facades.jsonrpc, cone.daemon.command"
    )
    heavy = [
        m
        for m in loaded
        if m.startswith((*FORBIDDEN, "cone.daemon.runtime", "uvloop", "mcp", "xmtp_bindings"))
    ]
    assert heavy == []
