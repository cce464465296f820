"""gen/ is output: it must be exactly what tools/genproto.py makes from proto/."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tree(root: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(root)): p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_committed_gen_matches_a_fresh_generation(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "genproto.py"), "--out", str(out)], check=True
    )
    fresh, committed = _tree(out), _tree(ROOT / "gen")
    assert sorted(fresh) == sorted(committed), "run `tox -e gen` and commit gen/"
    stale = [
        name for name, p in fresh.items() if not filecmp.cmp(p, committed[name], shallow=False)
    ]
    assert not stale, f"gen/ is stale for {stale}: run `tox -e gen` and commit gen/"


def test_generated_package_imports_beside_cone() -> None:
    import cone
    from conepb.v1 import cone_pb2

    assert cone.PROTOCOL_VERSION == 1
    assert cone_pb2.DESCRIPTOR.package == "cone.v1"
