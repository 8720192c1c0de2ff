"""History's pages: as fast with 1,000,000 requests stored as with 1,000?

Grows one store (the real schema, created by the store's own ``open``) to 10^3, 10^4, 10^5
and 10^6 requests, bulk-loaded in the store's own table layout (``signoff.store.tables``'s
columns and search text; on SQLite the search index too, as the migration backfills it),
and at each size times ~100 pages of each kind through ``Store.list_requests``: no filter,
a status, an agent, a person, a search for a rare word and for a common one, and the second
page via the cursor. Prints p50 and p99 in milliseconds and each p50 as a ratio to its
10^3 figure (1.00 = no slower), then each page's work, which other load on the machine does
not change: SQLite's virtual machine steps, PostgreSQL's shared buffers touched.

The requests: 10 agents, 10 people, 20 tools, 5 % pending; every other one's command holds
"build"; exactly 20 hold "quixotic", whatever the size.

    python bench/history.py [--sizes 1000,10000,100000,1000000] [--calls 100]
    python bench/history.py --pg [--dsn URL]  # PostgreSQL (default sizes up to 10^5)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from signoff.domain.decisions import DecisionRecord, Reject
from signoff.domain.requests import ApprovalRequest, RequestAdapter, Status
from signoff.store.base import RequestQuery, Store, to_micros
from signoff.store.search import search_text
from signoff.store.sqlite import SQLiteStore
from signoff.store.tables import REQUESTS, insert_sql, numbered, qmarks, request_page_sql

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ENDED: tuple[Status, ...] = ("approved", "rejected", "completed", "expired", "canceled")
WORDS = ("deploy", "test", "lint", "format", "release", "migrate", "backup", "cache")
RARE = "quixotic"
RARE_COUNT = 20
BATCH = 50_000
HERE = str(Path(__file__).resolve().parent)
DEFAULT_DSN = os.environ.get("SIGNOFF_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

Query = Callable[[int], RequestQuery]
"""The n-th query of a kind (some vary the agent or person they ask for)."""


def kinds(cursor: str) -> dict[str, Query]:
    """The pages timed, by name; ``cursor`` is the first page's next_cursor."""
    return {
        "no filter": lambda n: RequestQuery(),
        "status=rejected": lambda n: RequestQuery(status="rejected"),
        "agent": lambda n: RequestQuery(requested_by=f"agent:{n % 10}"),
        "person": lambda n: RequestQuery(decided_by=f"person{n % 10}"),
        "search, rare word": lambda n: RequestQuery(text=RARE),
        "search, common word": lambda n: RequestQuery(text="build"),
        "second page (cursor)": lambda n: RequestQuery(cursor=cursor),
    }


def row(n: int, rare_every: int, template: str) -> tuple[object, ...]:
    """The n-th request's row, in :data:`REQUESTS`'s columns (data from one template)."""
    rid = f"req_{n:012d}"
    status: Status = "pending" if n % 20 == 0 else ENDED[n % len(ENDED)]
    words = [WORDS[n % len(WORDS)], WORDS[(n // 8) % len(WORDS)]]
    if n % 2 == 0:
        words.append("build")
    if n % rare_every == 0 and n // rare_every < RARE_COUNT:
        words.append(RARE)
    command = " ".join([*words, str(n)])
    tool = f"tool{n % 20}"
    return (
        rid,
        "approval",
        status,
        f"session-{n % 5000}",
        tool,
        None,
        f"agent:{n % 10}",
        None,
        to_micros(T0) + n * 1000,
        None,
        1,
        None if status == "pending" else f"person{n % 10}",
        f"{tool} command {command}",
        template.replace("req_000000000000", rid),
    )


def template() -> str:
    """One request's JSON, as the rows' data (what a page reads back and validates)."""
    request = ApprovalRequest(
        id="req_000000000000",
        status="rejected",
        session_id="s",
        requested_by="agent:0",
        created_at=T0,
        updated_at=T0,
        allowed_decisions=("approve", "reject", "respond"),
        tool_name="tool0",
        tool_args={"command": "deploy build 0"},
        decision=DecisionRecord(decision=Reject(reason="no"), decided_by="person0", decided_at=T0),
    )
    assert search_text(request) == "tool0 command deploy build 0"  # the rows' own rule
    return RequestAdapter.dump_json(request).decode()


def rows(start: int, stop: int, rare_every: int) -> Iterator[tuple[object, ...]]:
    """Rows ``start`` to ``stop``."""
    data = template()
    for n in range(start, stop):
        yield row(n, rare_every, data)


def fill_sqlite(path: Path, start: int, stop: int, rare_every: int) -> None:
    """Append rows to the requests table, their search index entries, and ANALYZE."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous = OFF")
    insert = insert_sql(REQUESTS, qmarks)
    batch: list[tuple[object, ...]] = []
    for record in rows(start, stop, rare_every):
        batch.append(record)
        if len(batch) >= BATCH:
            db.executemany(insert, batch)
            batch.clear()
    db.executemany(insert, batch)
    # the search index, as the migration fills it for requests stored before it
    first = f"req_{start:012d}"
    db.execute(
        "INSERT INTO request_search (id) SELECT id FROM requests WHERE id >= ? ORDER BY id",
        (first,),
    )
    db.execute(
        "INSERT INTO requests_fts (rowid, search) SELECT s.seq, r.search FROM request_search s "
        "JOIN requests r ON r.id = s.id WHERE s.id >= ?",
        (first,),
    )
    db.commit()
    db.execute("ANALYZE")
    db.close()


async def fill_pg(url: str, start: int, stop: int, rare_every: int) -> None:
    """COPY rows into the requests table and ANALYZE."""
    import asyncpg

    db = await asyncpg.connect(url)
    try:
        await db.execute("SET synchronous_commit = off")
        batch: list[tuple[object, ...]] = []
        for record in rows(start, stop, rare_every):
            batch.append(record)
            if len(batch) >= BATCH:
                await db.copy_records_to_table("requests", records=batch, columns=REQUESTS.columns)
                batch.clear()
        await db.copy_records_to_table("requests", records=batch, columns=REQUESTS.columns)
        await db.execute("ANALYZE requests")
    finally:
        await db.close()


async def timed(store: Store, query: Query, calls: int) -> tuple[float, float]:
    """p50 and p99 seconds of ``calls`` pages."""
    await store.list_requests(query(0))  # warm
    samples = []
    for n in range(calls):
        start = time.perf_counter()
        await store.list_requests(query(n))
        samples.append(time.perf_counter() - start)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


Work = Callable[[RequestQuery], Awaitable[int]]
"""How much work one page is, whatever else runs on the machine: SQLite's virtual machine
steps, PostgreSQL's buffers touched."""
Figures = dict[int, dict[str, tuple[float, float, int]]]
"""By size, by kind of page: p50 and p99 seconds, and the page's work."""


async def measure(store: Store, work: Work, calls: int) -> dict[str, tuple[float, float, int]]:
    """Every kind of page, timed, and its work."""
    first = await store.list_requests(RequestQuery())
    assert first.next_cursor is not None
    rare = await store.list_requests(RequestQuery(text=RARE))
    assert len(rare.items) == RARE_COUNT, len(rare.items)
    figures = {}
    for name, query in kinds(first.next_cursor).items():
        p50, p99 = await timed(store, query, calls)
        figures[name] = (p50, p99, await work(query(0)))
    return figures


def sqlite_work(path: Path) -> Work:
    """Virtual machine steps of one page's statement on SQLite (counted by a progress
    handler, to the nearest ten; the FTS5 index's own work is in C and not counted)."""

    async def steps(query: RequestQuery) -> int:
        page = request_page_sql(query, qmarks, fts=True)
        db = sqlite3.connect(path)
        count = [0]

        def tick() -> int:
            count[0] += 1
            return 0

        db.set_progress_handler(tick, 10)
        db.execute(page.sql, page.params).fetchall()
        db.close()
        return count[0] * 10

    return steps


def pg_work(url: str) -> Work:
    """Shared buffers one page's statement touches on PostgreSQL (EXPLAIN ANALYZE)."""

    async def buffers(query: RequestQuery) -> int:
        import asyncpg

        page = request_page_sql(query, numbered)
        db = await asyncpg.connect(url)
        try:
            plan = await db.fetchval(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + page.sql, *page.params
            )
        finally:
            await db.close()
        top = json.loads(plan)[0]["Plan"]
        return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])

    return buffers


def report(label: str, unit: str, figures: Figures) -> None:
    """Two tables: each kind of page at each size, p50/p99 ms and the p50's ratio to the
    smallest size's; then its work and the work's ratio."""
    sizes = sorted(figures)
    base = figures[sizes[0]]
    print(f"\n{label}: p50 / p99 ms (p50 ratio to {sizes[0]:,} rows)")
    print(f"{'page':24}" + "".join(f"{n:>26,}" for n in sizes))
    for name in base:
        cells = []
        for n in sizes:
            p50, p99, _ = figures[n][name]
            cells.append(f"{p50 * 1e3:7.2f} / {p99 * 1e3:7.2f} ({p50 / base[name][0]:4.2f})")
        print(f"{name:24}" + "".join(f"{c:>26}" for c in cells))
    print(f"\n{label}: {unit} per page (ratio to {sizes[0]:,} rows)")
    print(f"{'page':24}" + "".join(f"{n:>26,}" for n in sizes))
    for name in base:
        cells = [
            f"{figures[n][name][2]:,} ({figures[n][name][2] / max(1, base[name][2]):4.2f})"
            for n in sizes
        ]
        print(f"{name:24}" + "".join(f"{c:>26}" for c in cells))


async def grow(
    sizes: list[int],
    open_store: Callable[[], Awaitable[Store]],
    fill: Callable[[int, int], Awaitable[None]],
    work: Work,
    calls: int,
) -> Figures:
    """Grow the store through ``sizes``, measuring at each."""
    figures: Figures = {}
    stored = 0
    for size in sizes:
        start = time.perf_counter()
        await fill(stored, size)
        print(f"filled {stored:,} -> {size:,} rows in {time.perf_counter() - start:.1f} s")
        stored = size
        store = await open_store()
        try:
            figures[size] = await measure(store, work, calls)
        finally:
            await store.close()
    return figures


async def sqlite_run(sizes: list[int], calls: int) -> None:
    """Grow a SQLite file and report."""
    rare_every = sizes[0] // RARE_COUNT
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.db"
        created = SQLiteStore(path)
        await created.open()
        await created.close()

        async def opened() -> Store:
            store = SQLiteStore(path)
            await store.open()
            return store

        async def fill(start: int, stop: int) -> None:
            await asyncio.to_thread(fill_sqlite, path, start, stop, rare_every)

        figures = await grow(sizes, opened, fill, sqlite_work(path), calls)
        report("SQLite", "virtual machine steps", figures)


async def pg_run(sizes: list[int], calls: int, dsn: str) -> None:
    """Grow a fresh PostgreSQL database, report, drop it."""
    import sys

    sys.path.insert(0, HERE)
    from lifecycle_pg import drop_database, fresh_database

    from signoff.store.postgres import PostgresStore

    rare_every = sizes[0] // RARE_COUNT
    url = await fresh_database(dsn)
    try:
        created = PostgresStore(url)
        await created.open()
        await created.close()

        async def opened() -> Store:
            store = PostgresStore(url)
            await store.open()
            return store

        async def fill(start: int, stop: int) -> None:
            await fill_pg(url, start, stop, rare_every)

        figures = await grow(sizes, opened, fill, pg_work(url), calls)
        report("PostgreSQL", "shared buffers touched", figures)
    finally:
        await drop_database(dsn, url)


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=None, help="comma-separated, e.g. 1000,10000")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    opts = parser.parse_args()
    default = "1000,10000,100000" if opts.pg else "1000,10000,100000,1000000"
    sizes = [int(s) for s in (opts.sizes or default).split(",")]
    run: Any = pg_run(sizes, opts.calls, opts.dsn) if opts.pg else sqlite_run(sizes, opts.calls)
    asyncio.run(run)


if __name__ == "__main__":
    main()
