"""The garbage collector in a process hosting the core (cone/_heap.py): what lives when
the core starts serving leaves the collector's walks, garbage does not, and stopping
gives it all back. In a subprocess: freezing is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

_PROBE = textwrap.dedent(
    """
    import gc, json, weakref
    from cone import _heap

    class Node:
        def __init__(self):
            self.me = self  # a cycle: only the collector frees it

    def walked(obj):
        return any(o is obj for o in gc.get_objects())

    kept = Node()
    dropped = Node()
    gone = weakref.ref(dropped)
    del dropped
    _heap.settle()
    out = {
        "garbage_freed": gone() is None,
        "kept_walked": walked(kept),
        "frozen": gc.get_freeze_count(),
    }
    after = Node()
    out["new_walked"] = walked(after)
    _heap.release()
    out["kept_walked_after_release"] = walked(kept)
    out["frozen_after_release"] = gc.get_freeze_count()
    print(json.dumps(out))
    """
)


def _probe() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_settle_frees_garbage_then_keeps_what_lives_out_of_collections() -> None:
    out = _probe()
    assert out["garbage_freed"] is True
    assert out["kept_walked"] is False
    assert isinstance(out["frozen"], int) and out["frozen"] > 0
    assert out["new_walked"] is True


def test_release_gives_the_kept_objects_back_to_the_collector() -> None:
    out = _probe()
    assert out["kept_walked_after_release"] is True
    assert out["frozen_after_release"] == 0
