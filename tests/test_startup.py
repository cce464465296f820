"""Start-up in one place: every entry point finds or hosts the core through
`cone.startup`, and nothing below it imports it back (settings walk down only)."""

from __future__ import annotations

from facades.test_boundaries import PACKAGE

from support.imports import imported

# The commands a user runs; each reaches the core, or resolves its settings, only
# through cone.startup.
ENTRY_POINTS = (
    "commands/command.py",
    "daemon/command.py",
    "facades/jsonrpc/command.py",
    "facades/mcp/command.py",
    "bridge/command.py",
    "backup/command.py",
    "demo/command.py",
)
# What start-up composes: none of it may climb back up into cone.startup.
BELOW = ("daemon", "facades", "core", "store", "engine", "config.py", "errors.py", "client.py")


def test_every_entry_point_starts_through_cone_startup() -> None:
    for name in ENTRY_POINTS:
        names = imported(PACKAGE / name)
        assert "cone.startup" in names, name
        assert "cone.daemon.runtime" not in names, f"{name} hosts the core itself"
        assert "cone.facades._host" not in names, name


def test_nothing_below_start_up_imports_it() -> None:
    entry_points = {PACKAGE / name for name in ENTRY_POINTS}
    for below in BELOW:
        path = PACKAGE / below
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            if source in entry_points:
                continue  # a command: above start-up, only filed beside what it runs
            assert "cone.startup" not in imported(source), source.relative_to(PACKAGE.parent)
