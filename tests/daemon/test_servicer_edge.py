"""The servicer talks to the core's own types only: it (and its mapping to the proto,
cone/daemon/convert.py) imports neither the store nor the engine, and reaches through
the core to its operations only (one part per group of RPCs), never to the store, the
engine or the intake's parts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cone.daemon.convert
import cone.daemon.servicer
from support.imports import imported

SOURCES = [Path(m.__file__) for m in (cone.daemon.servicer, cone.daemon.convert)]
# cone.daemon.fill compiles a proto message's fill from its descriptor: it imports no
# part of cone.
ALLOWED = (
    "cone.core.",
    "cone.errors",
    "cone.grpc_errors",
    "conepb.",
    "cone.daemon.convert",
    "cone.daemon.fill",
)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_the_servicer_imports_only_the_core_errors_and_the_generated_stubs(
    source: Path,
) -> None:
    ours = [name for name in imported(source) if name.startswith(("cone", "conepb"))]
    assert ours, "the servicer imports the core"
    assert [name for name in ours if not name.startswith(ALLOWED)] == []


#: The core's operations, one part per group of RPCs (cone/core/service.py).
OPERATIONS = {
    "backups",
    "consents",
    "freshness",
    "groups",
    "history",
    "installations",
    "intake",
    "receiving",
    "sending",
    "status",
}


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_the_servicer_calls_the_cores_operations_and_nothing_else_of_it(
    source: Path,
) -> None:
    called = {
        node.attr
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "core"
    }
    assert called <= OPERATIONS
