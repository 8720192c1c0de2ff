"""Full request lifecycles per second through the service on PostgreSQL, against plain asyncpg.

A lifecycle is submit, decide, wait, claim, complete. The baseline is a plain ``asyncpg``
loop doing the same writes (the request row, an audit entry and an event per step, one
transaction per step), measured in the same run on a fresh database of the same server.
The service is measured with one caller at a time and with many concurrent callers.

    python bench/lifecycle_pg.py [--lifecycles 1000] [--concurrency 64] [--dsn URL]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle import ARGS, one_lifecycle, through_service

from signoff.bus.local import LocalBus
from signoff.service import Service
from signoff.store.postgres import PostgresStore

DEFAULT_DSN = os.environ.get("SIGNOFF_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


async def fresh_database(dsn: str) -> str:
    """Create an empty database; its URL."""
    name = f"signoff_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return dsn.rsplit("/", 1)[0] + f"/{name}"


async def drop_database(dsn: str, url: str) -> None:
    """Drop a database made by :func:`fresh_database`."""
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
    finally:
        await admin.close()


STEPS = [
    ("created", "pending"),
    ("decided", "approved"),
    ("status", "executing"),
    ("result", "completed"),
]
"""A lifecycle's four steps: the event each writes and the status it leaves."""


class PlainAsyncpg:
    """A hand-written asyncpg loop making a lifecycle's writes: the request row, an audit
    entry and an event per step, one transaction per step (the server's
    ``synchronous_commit``)."""

    def __init__(self, db: asyncpg.Connection) -> None:
        self.db = db
        self.prev = "0" * 64

    @classmethod
    async def create(cls, url: str) -> PlainAsyncpg:
        """Connect to ``url`` and make the three tables."""
        db = await asyncpg.connect(url)
        await db.execute(
            """
            CREATE TABLE requests (id TEXT PRIMARY KEY, status TEXT, session_id TEXT,
                created_us BIGINT, version INTEGER, data TEXT);
            CREATE INDEX requests_session
                ON requests (session_id, status, created_us DESC, id DESC);
            CREATE TABLE audit (seq BIGSERIAL PRIMARY KEY, request_id TEXT, action TEXT,
                details TEXT, prev_hash TEXT, hash TEXT);
            CREATE TABLE events (seq BIGSERIAL PRIMARY KEY, type TEXT, request_id TEXT,
                data TEXT);
            """
        )
        return cls(db)

    async def lifecycle(self, n: int) -> None:
        """Submit, decide, claim and complete request ``n``: four commits."""
        db = self.db
        rid = f"req_{n:012d}"
        for version, (event, status) in enumerate(STEPS, start=1):
            data = json.dumps({"id": rid, "status": status, "tool_name": "shell", "args": ARGS})
            details = json.dumps({"args": ARGS, "status": status}, sort_keys=True)
            digest = hashlib.sha256((self.prev + details).encode()).hexdigest()
            async with db.transaction():
                if version == 1:
                    await db.execute(
                        "INSERT INTO requests VALUES ($1, $2, $3, $4, $5, $6)",
                        rid,
                        status,
                        "s1",
                        time.time_ns() // 1000,
                        version,
                        data,
                    )
                else:
                    await db.execute(
                        "UPDATE requests SET status = $1, version = $2, data = $3 "
                        "WHERE id = $4 AND version = $5",
                        status,
                        version,
                        data,
                        rid,
                        version - 1,
                    )
                await db.execute(
                    "INSERT INTO audit (request_id, action, details, prev_hash, hash) "
                    "VALUES ($1, $2, $3, $4, $5)",
                    rid,
                    event,
                    details,
                    self.prev,
                    digest,
                )
                await db.execute(
                    "INSERT INTO events (type, request_id, data) VALUES ($1, $2, $3)",
                    event,
                    rid,
                    data,
                )
            self.prev = digest

    async def close(self) -> None:
        """Close the connection."""
        await self.db.close()


Statements = list[list[tuple[str, tuple[object, ...]]]]
"""Statements with their parameters, by pause+resume (or lifecycle)."""


class _RecordingStore(PostgresStore):
    """The real store, keeping every statement its pooled connections run, with its
    parameters, in the order they were answered."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.statements: list[tuple[str, tuple[object, ...]]] = []

    async def _joined(self, conn: Any) -> None:
        await super()._joined(conn)
        conn.add_query_logger(lambda q: self.statements.append((q.query, tuple(q.args))))


async def record_pg(url: str, lifecycles: int) -> Statements:
    """Every statement the PostgreSQL store's connections run for each of ``lifecycles``
    lifecycles through the service (one at a time, on the database at ``url``, after its
    schema is made): what :func:`replay_pg` runs again."""
    store = _RecordingStore(url)
    steps: Statements = []
    async with Service(store, bus=LocalBus(), read_file=None) as service:
        for n in range(lifecycles):
            first = len(store.statements)
            await one_lifecycle(service, n)
            steps.append(store.statements[first:])
    return steps


async def replay_pg(
    db: asyncpg.Connection, statements: list[tuple[str, tuple[object, ...]]]
) -> None:
    """Run recorded statements again, in order, with their parameters, on a plain
    connection (asyncpg prepares and keeps each, as the store's connections do)."""
    for sql, args in statements:
        await db.fetch(sql, *args)


async def plain_asyncpg(url: str, lifecycles: int) -> float:
    """Lifecycles per second of a hand-written asyncpg loop doing the same writes."""
    loop = await PlainAsyncpg.create(url)
    start = time.perf_counter()
    for n in range(lifecycles):
        await loop.lifecycle(n)
    elapsed = time.perf_counter() - start
    await loop.close()
    return lifecycles / elapsed


async def run(opts: argparse.Namespace) -> None:
    """Measure all three on fresh databases and print them with their ratios."""
    figures: dict[str, float] = {}
    measures: list[tuple[str, Callable[[str], Awaitable[float]]]] = [
        ("plain", lambda url: plain_asyncpg(url, opts.lifecycles)),
        ("serial", lambda url: through_service(PostgresStore(url), opts.lifecycles // 4, 1)),
        (
            "batched",
            lambda url: through_service(PostgresStore(url), opts.lifecycles, opts.concurrency),
        ),
    ]
    for label, measure in measures:
        url = await fresh_database(opts.dsn)
        try:
            figures[label] = await measure(url)
        finally:
            await drop_database(opts.dsn, url)
    base = figures["plain"]
    print(f"plain asyncpg loop (same writes, one txn per step): {base:9.1f} lifecycles/s")
    print(
        f"signoff service, 1 caller:                          {figures['serial']:9.1f}"
        f" lifecycles/s  ratio {figures['serial'] / base:.2f}"
    )
    print(
        f"signoff service, {opts.concurrency} concurrent callers:            "
        f"{figures['batched']:9.1f} lifecycles/s  ratio {figures['batched'] / base:.2f}"
    )


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifecycles", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
