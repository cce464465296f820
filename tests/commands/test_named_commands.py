"""Every error text in cone that tells the user to run a command names one that exists:
`run `cone …``, `start it with `cone …``, `create one with `cone …`` and the bare
`run X first` must each parse with cone's own parser."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

import cone
from cone.cli import build_parser

PACKAGE = Path(cone.__file__).parent
# "run `cone X …`", "start it with `cone X …`", "create one with `cone X …`", "retry with …"
_QUOTED = re.compile(r"(?:\brun|start it with|create one with|retry with)\s+`(cone [^`]*)`")
# "run X first": a command named by its bare name
_BARE = re.compile(r"\brun ([a-z][a-z-]*) first\b")
# What a placeholder in an f-string stands for, when it is a value of its own.
_SAMPLE = "X"


def _text(node: ast.expr) -> str:
    """A string constant or f-string, its placeholders as sample values: a placeholder
    right after a space is a value (`--home {home}`), one glued to a word adds flags
    (`cone daemon{flags}`) and is left out."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    parts: list[str] = []
    assert isinstance(node, ast.JoinedStr)
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif not parts or parts[-1].endswith((" ", "`")):
            parts.append(_SAMPLE)
    return "".join(parts)


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def named_commands() -> list[tuple[str, str]]:
    """(where, argv text) for every command an error text in cone/ tells the user to run."""
    named: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        # Adjacent literals are one string; f-strings nest their constants: take the
        # outermost string nodes only.
        inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant | ast.JoinedStr) or id(node) in skip | inner:
                continue
            if isinstance(node, ast.Constant) and not isinstance(node.value, str):
                continue
            text = _text(node)
            where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
            named += [(where, m.group(1)) for m in _QUOTED.finditer(text)]
            named += [(where, f"cone {m.group(1)}") for m in _BARE.finditer(text)]
    return named


def test_the_walk_finds_the_texts_it_is_meant_to_check() -> None:
    found = {argv for _, argv in named_commands()}
    assert "cone daemon" in found  # "start it with `cone daemon{flags}`"
    assert "cone init --home X" in found  # the missing identity


@pytest.mark.parametrize(("where", "argv"), named_commands())
def test_every_command_an_error_names_parses(where: str, argv: str) -> None:
    words = shlex.split(argv)
    assert words[0] == "cone", where
    try:
        build_parser().parse_args(words[1:])
    except SystemExit as exit_:
        pytest.fail(f"{where}: `{argv}` does not parse (exit {exit_.code})")
