"""Full request lifecycles per second through the service on SQLite, against plain sqlite3.

A lifecycle is submit, decide, wait, claim, complete. The baseline is a plain ``sqlite3``
loop doing the same writes (the request row, an audit entry and an event per step, one
transaction per step) on the same durability settings (WAL, synchronous=FULL), measured
in the same run. The service is measured with one caller at a time and with many
concurrent callers, whose commits it batches.

    python bench/lifecycle.py [--lifecycles 2000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from signoff.bus.local import LocalBus
from signoff.domain.principals import Principal
from signoff.service import Service
from signoff.store.base import Store
from signoff.store.sqlite import SQLiteStore

AGENT = Principal(name="bench-agent", role="agent")
APPROVER = Principal(name="bench-approver", role="approver")
ARGS = {"command": "ls -la /srv/data", "cwd": "/srv"}


def plain_sqlite(path: Path, lifecycles: int) -> float:
    """Lifecycles per second of a hand-written sqlite3 loop doing the same writes."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(
        """
        CREATE TABLE requests (id TEXT PRIMARY KEY, status TEXT, session_id TEXT,
            created_us INTEGER, version INTEGER, data TEXT);
        CREATE INDEX requests_session ON requests (session_id, status, created_us DESC, id DESC);
        CREATE TABLE audit (seq INTEGER PRIMARY KEY, request_id TEXT, action TEXT,
            details TEXT, prev_hash TEXT, hash TEXT);
        CREATE TABLE events (seq INTEGER PRIMARY KEY, type TEXT, request_id TEXT, data TEXT);
        """
    )
    prev = "0" * 64
    start = time.perf_counter()
    for n in range(lifecycles):
        rid = f"req_{n:012d}"
        steps = [
            ("created", "pending"),
            ("decided", "approved"),
            ("status", "executing"),
            ("result", "completed"),
        ]
        for version, (event, status) in enumerate(steps, start=1):
            data = json.dumps({"id": rid, "status": status, "tool_name": "shell", "args": ARGS})
            details = json.dumps({"args": ARGS, "status": status}, sort_keys=True)
            digest = hashlib.sha256((prev + details).encode()).hexdigest()
            db.execute("BEGIN IMMEDIATE")
            if version == 1:
                db.execute(
                    "INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?)",
                    (rid, status, "s1", time.time_ns() // 1000, version, data),
                )
            else:
                db.execute(
                    "UPDATE requests SET status = ?, version = ?, data = ? "
                    "WHERE id = ? AND version = ?",
                    (status, version, data, rid, version - 1),
                )
            db.execute(
                "INSERT INTO audit (request_id, action, details, prev_hash, hash) "
                "VALUES (?, ?, ?, ?, ?)",
                (rid, event, details, prev, digest),
            )
            db.execute(
                "INSERT INTO events (type, request_id, data) VALUES (?, ?, ?)", (event, rid, data)
            )
            db.execute("COMMIT")
            prev = digest
    elapsed = time.perf_counter() - start
    db.close()
    return lifecycles / elapsed


async def one_lifecycle(service: Service, n: int) -> None:
    """Submit, decide while a waiter waits, claim and complete one request."""
    submitted = await service.submit(
        {"session_id": f"s{n % 50}", "tool_name": "shell", "tool_args": ARGS}, AGENT
    )
    request_id = submitted.request.id
    waiter = asyncio.create_task(service.wait(request_id, timeout=30))
    await service.decide(request_id, {"type": "approve"}, APPROVER)
    decided = await waiter
    assert decided.status == "approved", decided.status
    await service.claim(request_id, ARGS, AGENT)
    done = await service.complete(request_id, AGENT, result="ok")
    assert done.status == "completed"


async def through_service(store: Store, lifecycles: int, concurrency: int) -> float:
    """Lifecycles per second through the service on ``store``, ``concurrency`` at a time."""
    service = Service(store, bus=LocalBus(), read_file=None)
    async with service:
        counter = iter(range(lifecycles))

        async def worker() -> None:
            for n in counter:
                await one_lifecycle(service, n)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
        report = await service.verify_audit()
        assert report.ok, report
    return lifecycles / elapsed


def main() -> None:
    """Run both and print lifecycles per second and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifecycles", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = plain_sqlite(Path(tmp) / "plain.db", opts.lifecycles)
        serial = asyncio.run(
            through_service(SQLiteStore(Path(tmp) / "serial.db"), opts.lifecycles // 4, 1)
        )
        batched = asyncio.run(
            through_service(
                SQLiteStore(Path(tmp) / "batched.db"), opts.lifecycles, opts.concurrency
            )
        )
    print(f"plain sqlite3 loop (same writes, one txn per step): {base:9.1f} lifecycles/s")
    print(
        f"signoff service, 1 caller:                          {serial:9.1f} lifecycles/s"
        f"  ratio {serial / base:.2f}"
    )
    print(
        f"signoff service, {opts.concurrency} concurrent callers:            "
        f"{batched:9.1f} lifecycles/s  ratio {batched / base:.2f}"
    )
    print("target: ratio >= 0.50")


if __name__ == "__main__":
    main()
