"""The server process's heap and Python's cycle collector.

A full collection (generation 2) walks every object the collector tracks and holds the
event loop, and the GIL, while it does: with the modules, the app, its schemas and routes
loaded, that is about 100,000 objects (101,500 under ``signoff serve``), tens of
milliseconds on a busy two-core machine, for every request in flight at that moment. None
of those objects is garbage: they live as long as the process. :func:`settle` collects
once after start-up and moves what is left out of the collector's reach (``gc.freeze``),
so later full collections walk only what the server allocated since (bench/RESULTS.md,
"Latency at 60 lifecycles a second"). Reference counting still frees a frozen object the
moment nothing refers to it; only a reference cycle among frozen objects, if one ever
became garbage, would stay until the process ends.

It also collects the young generation every :data:`YOUNG` allocations instead of
Python's 700. A young collection promotes whatever is alive at that moment, and under
load that is mostly the objects of requests in flight, which die a moment later; they
pile up in the old generation, and each time it has grown by a quarter Python runs a
full collection. With 1,000 WebSockets open and lifecycles running (bench/server.py on a
slow two-core host) that was seven full collections of 10-80 ms in a 20-second run; at
20,000, one. A young collection then walks up to 20,000 objects, under half a
millisecond.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG", "settle"]

YOUNG = 20_000
"""Allocations (less deallocations) between two collections of the young generation."""


def settle() -> None:
    """Collect start-up's garbage, freeze everything left, and collect the young generation
    every :data:`YOUNG` allocations (call once, after start-up)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
