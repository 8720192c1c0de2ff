"""Listing one session's pending requests on PostgreSQL: as fast with 1,000,000 rows as with 1,000?

The PostgreSQL twin of ``pending_scale.py``. Fills two fresh databases (the real schema,
created by ``PostgresStore.open``) with requests spread over many sessions and statuses,
the same 60 pending requests of one session in each, bulk-loaded with ``COPY`` and then
analyzed, and times ``list_requests(session_id=..., status="pending", limit=50)`` through
the store. Prints the medians, their ratio and the plan PostgreSQL chose for the very
statement the store sent. Both databases are dropped at the end.

    python bench/pending_scale_pg.py [--rows 1000000] [--calls 200] [--dsn URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_pg import DEFAULT_DSN, drop_database, fresh_database
from pending_scale import STATUSES, T0, TARGET, TARGET_PENDING, row

from signoff.store.base import RequestQuery, to_micros
from signoff.store.postgres import PostgresStore
from signoff.store.tables import REQUESTS

# The requests table's columns, as the store writes them (also the order of
# pending_scale.row's tuples).
COLUMNS = REQUESTS.columns
BATCH = 100_000


class RecordingStore(PostgresStore):
    """A PostgresStore that remembers the last read it sent, so EXPLAIN shows that statement."""

    last: tuple[str, tuple[object, ...]] | None = None

    async def _fetch(self, sql: str, *args: object) -> list[Any]:
        self.last = (sql, args)
        return await super()._fetch(sql, *args)


def records(rows: int) -> Iterator[tuple[object, ...]]:
    """The rows of ``pending_scale.fill``: the target's 60 pending among ``rows`` others."""
    template = row(0, "x", "pending")[-1]
    assert isinstance(template, str)
    step = max(1, rows // TARGET_PENDING)
    base_us = to_micros(T0)
    for n in range(rows):
        if n % step == 0 and n // step < TARGET_PENDING:
            yield row(n, TARGET, "pending")
        else:
            rid = f"req_{n:012d}"
            yield (
                rid,
                "approval",
                STATUSES[n % len(STATUSES)],
                f"session-{n % 20_000}",
                "shell",
                None,
                "agent",
                None,
                base_us + n * 1000,
                None,
                1,
                None,
                f"shell command echo {n}",
                template.replace("req_000000000000", rid),
            )


async def fill(url: str, rows: int) -> None:
    """Create the schema through the store, then COPY ``rows`` rows in and ANALYZE."""
    store = PostgresStore(url)
    await store.open()
    await store.close()
    db = await asyncpg.connect(url)
    try:
        # A bulk load: losing it in a crash costs nothing, so do not wait on WAL flushes.
        await db.execute("SET synchronous_commit = off")
        batch: list[tuple[object, ...]] = []
        for record in records(rows):
            batch.append(record)
            if len(batch) >= BATCH:
                await db.copy_records_to_table("requests", records=batch, columns=COLUMNS)
                batch.clear()
        if batch:
            await db.copy_records_to_table("requests", records=batch, columns=COLUMNS)
        await db.execute("ANALYZE requests")
    finally:
        await db.close()


async def time_listing(url: str, calls: int) -> tuple[float, str]:
    """Median seconds of one page of the target session's pending requests, and its plan."""
    store = RecordingStore(url)
    await store.open()
    try:
        query = RequestQuery(session_id=TARGET, status="pending", limit=50)
        page = await store.list_requests(query)
        assert len(page.items) == 50 and page.next_cursor is not None
        assert store.last is not None
        sql, args = store.last
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            await store.list_requests(query)
            samples.append(time.perf_counter() - start)
    finally:
        await store.close()
    db = await asyncpg.connect(url)
    try:
        plan = await db.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, *args)
    finally:
        await db.close()
    return statistics.median(samples), "\n".join("    " + r[0] for r in plan)


async def run(opts: argparse.Namespace) -> None:
    """Fill both databases, time both, print the figures, drop both."""
    made: list[str] = []
    try:
        small = await fresh_database(opts.dsn)
        made.append(small)
        big = await fresh_database(opts.dsn)
        made.append(big)
        await fill(small, 1_000)
        start = time.perf_counter()
        await fill(big, opts.rows)
        print(f"filled {opts.rows:,} rows (COPY + ANALYZE) in {time.perf_counter() - start:.1f} s")
        t_small, _ = await time_listing(small, opts.calls)
        t_big, plan = await time_listing(big, opts.calls)
    finally:
        for url in made:
            await drop_database(opts.dsn, url)
    print(f"pending page of one session, 1,000 rows stored:      {t_small * 1e3:7.3f} ms")
    print(f"pending page of one session, {opts.rows:,} rows stored: {t_big * 1e3:7.3f} ms")
    print(f"ratio big/small: {t_big / t_small:.2f} (1.00 = no slower)")
    print(f"plan of the store's statement with {opts.rows:,} rows:")
    print(plan)


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
