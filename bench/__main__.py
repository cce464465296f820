"""Run benchmark harnesses: `python -m bench NAME [ARGS...]`, or with no name list them.

Each harness is a module `bench/NAME.py` with `main(argv) -> None` that prints its
figures and the ratio against its baseline, measured in the same run.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> None:
    names = sorted(
        m.name
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if not m.name.startswith("_")
    )
    if len(sys.argv) < 2 or sys.argv[1] not in names:
        print("usage: python -m bench NAME [ARGS...]; harnesses:", ", ".join(names))
        raise SystemExit(2)
    importlib.import_module(f"bench.{sys.argv[1]}").main(sys.argv[2:])


main()
