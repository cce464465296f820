"""The hosted core keeps what lives when it starts serving out of the garbage
collector's full walks (cone/_heap.py, docs/bench.md history), and gives it back when it
stops: `running_core` itself, in this process, on the devnet."""

from __future__ import annotations

import gc
from pathlib import Path

from cone.config import Paths, Settings
from cone.daemon.runtime import running_core


async def test_the_hosted_core_freezes_its_start_up_objects_while_it_serves(
    devnet: str, home: Path
) -> None:
    assert gc.get_freeze_count() == 0
    settings = Settings(paths=Paths(home), network="local", api_url=devnet, catchup_interval_s=2.0)
    async with running_core(settings) as running:
        assert running.socket.exists()
        # The interpreter, the core and everything loaded: tens of thousands of objects.
        assert gc.get_freeze_count() > 10_000
    assert gc.get_freeze_count() == 0
