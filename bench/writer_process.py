"""64 concurrent callers on the SQLite store, its writer a thread or a process, against the
plain sqlite3 loop.

Target 4 of issue 22 asks 64 concurrent callers for 1.5 times the plain sqlite3 loop of
``bench/lifecycle.py``. With a writer thread the store's statements take turns with the
busy event loop under the GIL (bench/RESULTS.md, "A writer thread beside the event loop");
``SQLiteStore(path, writer="process")`` (``signoff serve --sqlite-writer process``) hands
its writes to a process of its own (``signoff.store.sqlite_writer``). The plain loop, the
store with a writer thread and the store with a writer process take turns in ``--rounds``
rounds, each on a fresh file, the two stores through the service as ``bench/lifecycle.py``
runs them (submit, decide while a waiter waits, claim, complete; the audit chain verified
after each run). The writer process runs twice a round: in a heap left as Python keeps it,
and in one kept as ``signoff serve`` keeps its own (``server/heap.py``: start-up's objects
frozen out of the cycle collector's reach, the young generation collected every 20,000
allocations instead of 700), undone after. It prints each one's lifecycles per second and
its ratio to the plain loop, and for the writer process the event loop thread's CPU a
lifecycle, against what 1.5 times the plain loop allows it.

    python bench/writer_process.py [--lifecycles 1000] [--rounds 4] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from lifecycle import CpuClock, plain_sqlite, through_service

from signoff.server import heap
from signoff.store.sqlite import SQLiteStore

SUBJECTS = {
    "plain": "plain sqlite3 loop",
    "thread": "signoff, writer thread",
    "process": "signoff, writer process",
    "served": "  the same, heap as serve's",
}


@contextmanager
def served_heap() -> Iterator[None]:
    """While entered, the process's heap and cycle collector as ``signoff serve`` keeps
    them (:func:`signoff.server.heap.settle`); Python's own settings again after."""
    threshold = gc.get_threshold()
    heap.settle()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def run(opts: argparse.Namespace) -> None:
    """The four in turns; print their rates, and the writer process's loop CPU."""
    n, callers = opts.lifecycles, opts.concurrency
    seconds = dict.fromkeys(SUBJECTS, 0.0)
    loop_cpu = dict.fromkeys(("process", "served"), 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(opts.rounds):
            names = list(seconds)
            for name in names[k % 4 :] + names[: k % 4]:
                path = Path(tmp) / f"{name}-{k}.db"
                if name == "plain":
                    seconds[name] += n / plain_sqlite(path, n)
                elif name == "thread":
                    seconds[name] += n / asyncio.run(through_service(SQLiteStore(path), n, callers))
                else:
                    store, clock = SQLiteStore(path, writer="process"), CpuClock()
                    with served_heap() if name == "served" else nullcontext():
                        rate = asyncio.run(through_service(store, n, callers, timed=clock))
                    seconds[name] += n / rate
                    loop_cpu[name] += clock.loop
    total = opts.rounds * n
    base = total / seconds["plain"]
    print(f"{opts.rounds} rounds of {n} lifecycles, {callers} callers, in turns")
    for name, label in SUBJECTS.items():
        rate = total / seconds[name]
        print(f"{label:28s} {rate:8.1f} lifecycles/s  ratio {rate / base:.2f}")
    for name in loop_cpu:
        print(
            f"{SUBJECTS[name].strip()}: event loop thread {loop_cpu[name] / total * 1e3:.3f} ms "
            f"of CPU a lifecycle (1.5x the plain loop allows at most {1e3 / (1.5 * base):.3f})"
        )


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifecycles", type=int, default=1000, help="per round and subject")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=64)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
