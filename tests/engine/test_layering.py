"""The engine's layering: the core reaches it only through its roles and values, the
roles import nothing of libxmtp (a unit test loads them without xmtp-bindings), and
the engine imports neither the core nor the store (the daemon hands it what it needs
of the store). grpc comes with cone.errors, so the roles load it too."""

from __future__ import annotations

from pathlib import Path

import cone
from support.imports import imported, loaded_by

PACKAGE = Path(cone.__file__).parent
CORE_MAY = ("cone.engine.port", "cone.engine.values", "cone.engine.roles")


def test_the_core_imports_only_the_engines_roles_and_values() -> None:
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        engine = {n for n in imported(path) if n.startswith("cone.engine")}
        bad = sorted(n for n in engine if not n.startswith(CORE_MAY))
        assert not bad, f"{path.relative_to(PACKAGE.parent)} imports {bad}"


def test_the_engine_imports_neither_the_core_nor_the_store() -> None:
    for path in sorted((PACKAGE / "engine").rglob("*.py")):
        bad = sorted(n for n in imported(path) if n.startswith(("cone.core", "cone.store")))
        assert not bad, f"{path.relative_to(PACKAGE.parent)} imports {bad}"


def test_the_roles_and_their_fakes_load_neither_libxmtp_nor_http_nor_the_store() -> None:
    loaded = loaded_by(
        "import pkgutil, importlib\n"
        "import cone.engine.roles as r, cone.engine.port\n"
        "for m in pkgutil.iter_modules(r.__path__): importlib.import_module(r.__name__ + '.' + m.name)"
    )
    heavy = [
        m
        for m in loaded
        if m.split(".")[0] in ("xmtp_bindings", "aiohttp", "sqlcipher3")
        or m.startswith(("cone.core", "cone.store"))
    ]
    assert heavy == []
