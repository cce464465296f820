"""The operator's commands are a facade: they never import the store, the core or the
engine, and parsing the command line loads no libxmtp."""

from __future__ import annotations

from facades.test_boundaries import FORBIDDEN, PACKAGE

from support.imports import imported, loaded_by


def test_the_commands_never_import_store_core_or_engine() -> None:
    for path in sorted((PACKAGE / "commands").rglob("*.py")):
        bad = sorted(n for n in imported(path) if n.startswith(FORBIDDEN))
        assert not bad, f"{path.relative_to(PACKAGE.parent)} imports {bad}"


def test_parsing_the_command_line_loads_neither_libxmtp_nor_the_core() -> None:
    loaded = loaded_by(
        "import cone.cli, cone.commands.command\ncone.cli.build_parser().parse_args(['status'])"
    )
    heavy = [m for m in loaded if m.startswith((*FORBIDDEN, "uvloop", "xmtp_bindings"))]
    assert heavy == []
