"""What a module's source imports, and what importing something loads: the layering
tests' two readings."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path


def imported(path: Path) -> set[str]:
    """The modules `path` names in its imports (anywhere in it; relative ones as written)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def loaded_by(code: str) -> list[str]:
    """Every module loaded once `code` has run in a fresh interpreter."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True, text=True)
    loaded: list[str] = json.loads(out.stdout)
    return loaded
