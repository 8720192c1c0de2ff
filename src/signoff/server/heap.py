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
"""

from __future__ import annotations

import gc

__all__ = ["settle"]


def settle() -> None:
    """Collect start-up's garbage, then freeze everything left (call once, after start-up)."""
    gc.collect()
    gc.freeze()
