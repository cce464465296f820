"""cone's floors: the import graph of `cone/`, its circles and its upward imports.

Every import counts, those under `if TYPE_CHECKING:` and inside functions too: a
circle that only the type checker or a late import keeps working is still a circle.
`python -m tests.test_layers` prints the figures for the whole package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import cone

PACKAGE = Path(cone.__file__).parent

#: The floors of `cone/`, lowest first: a module imports its own floor or lower ones.
FLOORS: list[tuple[str, ...]] = [
    (
        "cone",
        "cone.__init__",
        "cone.errors",
        "cone.grpc_errors",
        "cone.limits",
        "cone.config",
        "cone._fs",
        "cone._failpoints",
        "cone._malloc",
        "cone._shutdown",
        "cone._heap",
        "cone._log_file",
        "cone._logs",
        "cone.metrics",
        "cone.progress",
        "cone.rules",
        "cone.schema",
        "cone.destination",
        "cone.protoset",
    ),
    ("cone.store",),
    ("cone.engine",),
    ("cone.core",),
    ("cone.daemon",),
    ("cone.client",),
    ("cone.facades", "cone.jetstream"),
    (
        "cone.bridge",
        "cone.commands",
        "cone.backup",
        "cone.demo",
        "cone.devnet",
        "cone.startup",
        "cone._command",
        "cone.cli",
        "cone.__main__",
    ),
]

#: The core's own floors, lowest first: content and the request defaults, the intake,
#: the operations (and what they share), the host (`service.py`, which builds and
#: starts the parts) on top.
CORE_FLOORS: list[tuple[str, ...]] = [
    ("cone.core.content", "cone.core.validate"),
    ("cone.core.intake",),
    ("cone.core",),
    ("cone.core.service",),
]


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module under `root` by its dotted name (a package by its own name)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of `root` and the modules of `root` it imports, anywhere in it."""
    found = modules(root)
    edges: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges[name] |= {a.name for a in node.names if a.name in found}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:
                    if f"{base}.{alias.name}" in found:
                        edges[name].add(f"{base}.{alias.name}")
                    elif base in found:
                        edges[name].add(base)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected set of modules (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in edges.get(v, ()):
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def floor(name: str, floors: list[tuple[str, ...]]) -> int | None:
    """The floor of a module: the one naming its longest prefix."""
    best: tuple[int, int] | None = None
    for level, prefixes in enumerate(floors):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and (best is None or len(p) > best[0]):
                best = (len(p), level)
    return None if best is None else best[1]


def upward(
    edges: dict[str, set[str]], floors: list[tuple[str, ...]], only: str = "cone"
) -> list[tuple[str, str]]:
    """Imports from a module to one on a higher floor (within `only`)."""
    out = []
    for a, targets in edges.items():
        if not (a == only or a.startswith(only + ".")):
            continue
        fa = floor(a, floors)
        for b in targets:
            fb = floor(b, floors)
            if fa is not None and fb is not None and fb > fa:
                out.append((a, b))
    return sorted(out)


def test_cone_has_no_import_circle() -> None:
    # Type-only imports count: a module that needs another's type only for an
    # annotation names a Protocol of what it uses (cone/commands/_tail.py).
    assert circles(graph()) == []


def test_the_core_imports_down_its_floors() -> None:
    assert upward(graph(), CORE_FLOORS, only="cone.core") == []


def test_only_the_daemon_imports_the_host() -> None:
    importers = sorted(a for a, bs in graph().items() if "cone.core.service" in bs)
    assert [a for a in importers if not a.startswith(("cone.daemon.", "cone.startup"))] == []


def main() -> None:
    edges = graph()
    found = circles(edges)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports")
    print(f"{len(found)} import circles")
    for c in found:
        print("  ", " <-> ".join(c))
    up = upward(edges, FLOORS)
    print(f"{len(up)} upward imports between cone's floors")
    for a, b in up:
        print("  ", a, "->", b)
    core_up = upward(edges, CORE_FLOORS, only="cone.core")
    print(f"{len(core_up)} upward imports inside cone/core")
    for a, b in core_up:
        print("  ", a, "->", b)


if __name__ == "__main__":
    main()
