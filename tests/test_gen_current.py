"""gen/ and proto/cone.protoset are output: exactly what tools/genproto.py makes from proto/."""

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
    out, protoset = tmp_path / "gen", tmp_path / "cone.protoset"
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "genproto.py"), "--out", str(out), "--protoset", str(protoset)],
        check=True,
    )  # fmt: skip
    fresh, committed = _tree(out), _tree(ROOT / "gen")
    assert sorted(fresh) == sorted(committed), "run `tox -e gen` and commit gen/"
    stale = [
        name for name, p in fresh.items() if not filecmp.cmp(p, committed[name], shallow=False)
    ]
    assert not stale, f"gen/ is stale for {stale}: run `tox -e gen` and commit gen/"
    fresh_set = protoset.read_bytes()
    assert fresh_set == (ROOT / "proto" / "cone.protoset").read_bytes(), (
        "proto/cone.protoset is stale: run `tox -e gen` and commit it"
    )


def test_the_protoset_holds_the_service_and_every_file_it_imports() -> None:
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet.FromString(
        (ROOT / "proto" / "cone.protoset").read_bytes()
    ).file
    names = [f.name for f in files]
    assert "buf/validate/validate.proto" in names
    for position, file in enumerate(files):  # each file after the files it imports
        assert set(file.dependency) <= set(names[:position]), file.name
    (cone,) = [f for f in files if f.name == "conepb/v1/cone.proto"]
    assert [s.name for s in cone.service] == ["ConeService"]


def test_generated_package_imports_beside_cone() -> None:
    import cone
    from conepb.v1 import cone_pb2

    assert cone.PROTOCOL_VERSION == 1
    assert cone_pb2.DESCRIPTOR.package == "cone.v1"
