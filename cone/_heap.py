"""Python's cyclic garbage collector in a process that hosts the core.

A full collection (the oldest generation) walks every container object the process
holds, on whichever thread allocated last and with the GIL held: every other thread,
the event loop's included, waits for it. Once the core has started, most of those
objects live as long as the process (modules, classes, protos' descriptors, the
core's long-lived state): about 72,000 of them in `cone daemon`. A full walk after
a big store's start took 25 ms, and 156 ms once under load (docs/bench.md, history,
"The runtime's own costs"). `settle` collects once, then moves what survives out of
the collector's reach (`gc.freeze`): later collections walk only what came after; the
full collection after the start then took 2–4 ms.

What it costs: a start-up object that later becomes garbage inside a reference
cycle is not freed until `release` (reference counting still frees the rest), a
bounded, one-time amount. A `messages` page or a send is not changed by it: their
collections are young ones, about 3 µs a page on average.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect the garbage there is now, then keep every object alive now out of
    later collections (once, when the core starts serving)."""
    gc.collect()
    gc.freeze()


def release() -> None:
    """Give the objects `settle` kept out back to the collector (when the core stops:
    a process that goes on, as a test does, collects them again)."""
    gc.unfreeze()


__all__ = ["release", "settle"]
