"""glibc's allocator in a process that hosts the core: fewer arenas, freed memory given back.

libxmtp (Rust, through xmtp-bindings) allocates with the C library's malloc, from
its own threads (its runtime's workers and blocking pool) as well as cone's offload
threads. glibc gives each thread that allocates its own arena, up to 8 per core (16
on 2 cores), and memory freed in an arena stays in it: a burst of libxmtp work on
one thread (a listing of 10,000 conversations, a sync of every group, a burst of
1,000 incoming messages) leaves tens of MiB free in that thread's arena, and the
next burst on another thread allocates afresh in its own. Measured in the daemon
at 100,000 messages (docs/bench.md, "big store"): up to 158 MiB free inside the
arenas against 60 MiB in use, counted in its resident set.

So a process that hosts the core:

- limits the arenas to `ARENAS` (`limit_arenas`, from `cone._command.run_loop`
  before the loop and any libxmtp thread starts, so it holds however `cone daemon`
  is started: the `MALLOC_ARENA_MAX` environment variable would need every launcher
  to set it). glibc fixes its arena limit only once the ninth arena is made, so it
  must be set before then; threads beyond the limit share arenas (each thread's own
  cache takes small allocations without the lock);
- gives freed memory back (`trim`, glibc's `malloc_trim`) after the libxmtp calls
  that allocate the most at once: the listing and the sync of every conversation
  (cone/engine/_reads.py, _network.py). It takes milliseconds and runs on an offload
  thread.

Elsewhere (macOS, musl) both are no-ops.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import platform
from typing import Any

log = logging.getLogger(__name__)

#: glibc's `mallopt` parameter for the arena limit (malloc.h: M_ARENA_MAX).
_M_ARENA_MAX = -8
#: Arenas at most in a process hosting the core.
ARENAS = 2


@functools.cache
def _glibc() -> Any | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Limit glibc's malloc arenas in this process; whether it took (glibc only)."""
    libc = _glibc()
    if libc is None:
        return False
    took = bool(libc.mallopt(_M_ARENA_MAX, arenas))
    if not took:
        log.debug("glibc refused to limit its malloc arenas to %d", arenas)
    return took


def trim() -> None:
    """Give the memory free inside every arena back to the system (glibc only)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


__all__ = ["ARENAS", "limit_arenas", "trim"]
