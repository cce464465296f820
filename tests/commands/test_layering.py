"""The operator's commands are a facade: they never import the store, the core or the
engine, and parsing the command line loads no libxmtp."""

from __future__ import annotations

import json
import subprocess
import sys

from facades.test_boundaries import FORBIDDEN, PACKAGE, _imports


def test_the_commands_never_import_store_core_or_engine() -> None:
    for path in sorted((PACKAGE / "commands").rglob("*.py")):
        bad = sorted(n for n in _imports(path) if n.startswith(FORBIDDEN))
        assert not bad, f"{path.relative_to(PACKAGE.parent)} imports {bad}"


def test_parsing_the_command_line_loads_neither_libxmtp_nor_the_core() -> None:
    probe = (
        "import sys, json\n"
        "import cone.cli, cone.commands.command\n"
        "cone.cli.build_parser().parse_args(['status'])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True, text=True)
    loaded = json.loads(out.stdout)
    heavy = [m for m in loaded if m.startswith((*FORBIDDEN, "uvloop", "xmtp_bindings"))]
    assert heavy == []
