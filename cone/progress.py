"""Progress on stderr: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Reports `done` of `total` units for a labelled task."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self._label = label
        # Looked up now, not at import: cone/_logs.py may have replaced sys.stderr.
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._last_step = -1
        self._started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        """Report progress (cheap to call often)."""
        if total <= 0:
            return
        fraction = min(1.0, done / total)
        if self._tty:
            width = 30
            filled = int(fraction * width)
            bar = "#" * filled + "-" * (width - filled)
            self._stream.write(f"\r{self._label} [{bar}] {fraction:6.1%}")
            if done >= total:
                self._stream.write("\n")
            self._stream.flush()
            return
        step = int(fraction * 10)  # a line every 10 %
        if step != self._last_step:
            self._last_step = step
            elapsed = time.monotonic() - self._started
            print(f"{self._label}: {fraction:.0%} ({elapsed:.1f} s)", file=self._stream, flush=True)
