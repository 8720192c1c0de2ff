"""Listing one session's pending requests: as fast with 1,000,000 rows stored as with 1,000?

Fills two fresh SQLite stores (the real schema, created by ``SQLiteStore.open``) with
requests spread over many sessions and statuses, the same 60 pending requests of one
session in each, then times ``list_requests(session_id=..., status="pending", limit=50)``
through the store and prints the medians and their ratio.

    python bench/pending_scale.py [--rows 1000000] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from signoff.domain.requests import ApprovalRequest, RequestAdapter, Status
from signoff.store.base import RequestQuery, to_micros
from signoff.store.sqlite import SQLiteStore
from signoff.store.tables import REQUESTS, insert_sql, qmarks

TARGET = "session-target"
TARGET_PENDING = 60
STATUSES: tuple[Status, ...] = (
    "pending",
    "approved",
    "rejected",
    "completed",
    "expired",
    "canceled",
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
_INSERT = insert_sql(REQUESTS, qmarks)


def row(n: int, session: str, status: Status) -> tuple[object, ...]:
    """One requests row with a valid serialized request."""
    created = T0 + timedelta(microseconds=n * 1000)
    request = ApprovalRequest(
        id=f"req_{n:012d}",
        status=status,
        session_id=session,
        requested_by="agent",
        created_at=created,
        updated_at=created,
        allowed_decisions=("approve", "reject", "respond"),
        tool_name="shell",
        tool_args={"command": f"echo {n}"},
    )
    return (
        request.id,
        "approval",
        status,
        session,
        "shell",
        None,
        "agent",
        None,
        to_micros(created),
        None,
        1,
        None,
        f"shell command echo {n}",
        RequestAdapter.dump_json(request).decode(),
    )


async def fill(path: Path, rows: int) -> None:
    """Create the schema through the store, then bulk-load ``rows`` rows."""
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    template = row(0, "x", "pending")[-1]
    assert isinstance(template, str)
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous = OFF")
    step = max(1, rows // TARGET_PENDING)
    batch: list[tuple[object, ...]] = []
    for n in range(rows):
        if n % step == 0 and n // step < TARGET_PENDING:
            batch.append(row(n, TARGET, "pending"))
        else:
            session = f"session-{n % 20_000}"
            status = STATUSES[n % len(STATUSES)]
            created_us = to_micros(T0) + n * 1000
            data = template.replace("req_000000000000", f"req_{n:012d}")
            batch.append(
                (
                    f"req_{n:012d}",
                    "approval",
                    status,
                    session,
                    "shell",
                    None,
                    "agent",
                    None,
                    created_us,
                    None,
                    1,
                    None,
                    f"shell command echo {n}",
                    data,
                )
            )
        if len(batch) >= 50_000:
            db.executemany(_INSERT, batch)
            batch.clear()
    if batch:
        db.executemany(_INSERT, batch)
    db.commit()
    db.execute("ANALYZE")
    db.close()


async def time_listing(path: Path, calls: int) -> float:
    """Median seconds of one page of the target session's pending requests."""
    store = SQLiteStore(path)
    await store.open()
    try:
        query = RequestQuery(session_id=TARGET, status="pending", limit=50)
        page = await store.list_requests(query)
        assert len(page.items) == 50 and page.next_cursor is not None
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            await store.list_requests(query)
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)
    finally:
        await store.close()


async def main() -> None:
    """Fill both stores, time both, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=200)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, big = Path(tmp) / "small.db", Path(tmp) / "big.db"
        await fill(small, 1_000)
        start = time.perf_counter()
        await fill(big, opts.rows)
        print(f"filled {opts.rows:,} rows in {time.perf_counter() - start:.1f} s")
        t_small = await time_listing(small, opts.calls)
        t_big = await time_listing(big, opts.calls)
    print(f"pending page of one session, 1,000 rows stored:      {t_small * 1e3:7.3f} ms")
    print(f"pending page of one session, {opts.rows:,} rows stored: {t_big * 1e3:7.3f} ms")
    print(f"ratio big/small: {t_big / t_small:.2f} (1.00 = no slower)")


if __name__ == "__main__":
    asyncio.run(main())
