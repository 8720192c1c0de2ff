"""A prototype, for the measure only: the SQLite store's commits run by a writer process.

Target 4 of issue 22 asks 64 concurrent callers for 1.5 times the plain sqlite3 loop of
``bench/lifecycle.py``. The SQLite store runs its statements on a writer thread, which takes
turns with the busy event loop under the GIL (bench/RESULTS.md, "A writer thread beside the
event loop"). This script measures the design left: the same store with its ``commit``
handed to a process of its own. It is not a store to use (it carries only what a request's
lifecycle writes: a request inserted or updated, its audit entries and events), and the
service's audit chain is verified after each run.

:class:`ProcessStore` is :class:`~signoff.store.sqlite.SQLiteStore` (its schema, reads,
``prepare`` and committed records as they are) whose ``commit`` sends the write as plain rows
and parameters, through a socket pair with large buffers, to a process forked at ``open``.
The process checks for a duplicate and for the version, chains the audit rows
(``tables.chain_rows``), runs the statements, commits a batch at a time and answers each
write's audit rows and event seqs. The event loop sends a batch once the turn in which its
writes were made has run (``--send-at-once``: as soon as a write comes with no batch in
flight), at most ``--max-batch`` writes a batch and ``--depth`` batches in flight.

The plain loop, the store as it is (writer thread) and the prototype take turns in
``--rounds`` rounds; it prints each one's lifecycles per second, the ratio to the plain loop,
and for the prototype the event loop thread's CPU per lifecycle and the share of the run the
process was busy.

    python bench/writer_process.py [--lifecycles 1000] [--rounds 4] [--concurrency 64]
        [--depth 2] [--max-batch 32] [--send-at-once]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.sharedctypes
import pickle
import socket
import sqlite3
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lifecycle import CpuClock, hand_over_pair, plain_sqlite, through_service

from signoff.domain.audit import AuditDraft, committed_entry
from signoff.domain.events import committed_event
from signoff.domain.requests import ApprovalRequest
from signoff.store import sqlite_writes, tables
from signoff.store.base import Committed, DuplicateRequest, VersionConflict, Write
from signoff.store.sqlite import SQLiteStore

Insert = tuple[tuple[object, ...], tuple[str, str | None, str, str | None]]
"""A new request's row, and what its duplicate is looked up by."""
Update = tuple[tuple[object, ...], str | None, str]
"""An update's values, who decided, and the request's id."""
Audit = tuple[str, str, str | None, str | None, str | None, str]
"""An audit draft's action, actor, request id, statuses before and after, canonical details."""
Plan = tuple[Insert | None, Update | None, list[Audit], datetime, list[tuple[object, ...]]]
"""A write as the process takes it: plain rows and parameters."""


@dataclass(frozen=True)
class Feeding:
    """How the event loop feeds the process."""

    depth: int
    max_batch: int
    at_once: bool


# -- the process ---------------------------------------------------------------------------


def _writer(path: Path, sock: socket.socket, busy: Any) -> None:
    """The writer process: runs each batch it is handed in one transaction and answers, until
    it is handed an empty one; adds the seconds it was busy to ``busy``."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 5000")
    stream = sock.makefile("rb")
    sock.sendall(b"r")
    try:
        while size := int.from_bytes(stream.read(8), "little"):
            batch: list[Plan] = pickle.loads(stream.read(size))  # noqa: S301 - our own
            began = time.perf_counter()
            answer = pickle.dumps(_run_batch(conn, batch))
            busy.value += time.perf_counter() - began
            sock.sendall(len(answer).to_bytes(8, "little") + answer)
    finally:
        conn.close()
        sock.close()


def _run_batch(conn: sqlite3.Connection, batch: list[Plan]) -> list[Any]:
    """Each plan in its own savepoint (a plan alone in the transaction), one commit."""
    conn.execute("BEGIN IMMEDIATE")
    txn = sqlite_writes.Txn(conn)
    alone = len(batch) == 1
    answers: list[Any] = []
    for plan in batch:
        saved = txn.save()
        if not alone:
            conn.execute("SAVEPOINT write")
        try:
            answers.append(("ok", _apply(txn, plan)))
        except (DuplicateRequest, VersionConflict) as exc:
            txn.restore(saved)
            conn.execute("ROLLBACK TO write" if not alone else "ROLLBACK")
            if not alone:
                conn.execute("RELEASE write")
            refused = (
                ("duplicate", exc.existing_id)
                if isinstance(exc, DuplicateRequest)
                else ("conflict", exc.request_id)
            )
            answers.append(refused)
        else:
            if not alone:
                conn.execute("RELEASE write")
    if conn.in_transaction:
        txn.write_head()
        conn.execute("COMMIT")
    return answers


def _apply(txn: sqlite_writes.Txn, plan: Plan) -> tuple[list[tables.AuditRow], list[int]]:
    """One write's statements, as ``sqlite_writes.apply_write`` runs them for a lifecycle."""
    insert, update, audit, at, events = plan
    conn = txn.conn
    if insert is not None:
        row, (session_id, tool_call_id, requested_by, key) = insert
        request_id = str(row[0])
        existing = sqlite_writes.duplicate_row(conn, session_id, tool_call_id, requested_by, key)
        if existing is not None:
            raise DuplicateRequest(existing[0])
        try:
            conn.execute(sqlite_writes._INSERT_REQUEST, row)
        except sqlite3.IntegrityError:
            raise DuplicateRequest(request_id) from None
        sqlite_writes._index_text(conn, request_id, row[sqlite_writes._AT["search"]])
    if update is not None:
        values, decider, request_id = update
        if conn.execute(sqlite_writes._UPDATE_REQUEST, values).rowcount != 1:
            raise VersionConflict(request_id)
        conn.execute(sqlite_writes._SET_DECIDER, (decider, request_id, decider))
    rows: list[tables.AuditRow] = []
    if audit:
        drafts = [
            AuditDraft.model_construct(
                action=action, actor=actor, request_id=rid, from_status=was, to_status=now
            )
            for action, actor, rid, was, now, _ in audit
        ]
        seq, prev = txn.head
        rows = tables.chain_rows(drafts, [a[5] for a in audit], at, seq, prev)
        conn.executemany(sqlite_writes._INSERT_AUDIT, rows)
        txn.move_head(rows[-1][0], rows[-1][9])
    seqs = [int(conn.execute(sqlite_writes._INSERT_EVENT, e).lastrowid or 0) for e in events]
    return rows, seqs


# -- the store -----------------------------------------------------------------------------


class ProcessStore(SQLiteStore):
    """The SQLite store with its commits run by a writer process (lifecycle writes only)."""

    def __init__(self, path: Path, feeding: Feeding) -> None:
        super().__init__(path)
        self.feeding = feeding
        self.busy = multiprocessing.get_context("fork").Value("d", 0.0)
        self._pending: list[tuple[Plan, asyncio.Future[Any]]] = []
        self._in_flight: deque[list[asyncio.Future[Any]]] = deque()
        self._flush_due = False

    async def open(self) -> None:
        """The store as it is (schema, readers), then the writer process."""
        await super().open()
        ours, theirs = hand_over_pair()
        self._process = multiprocessing.get_context("fork").Process(
            target=_writer, args=(self.path, theirs, self.busy), name="bench-writer-process"
        )
        self._process.start()
        theirs.close()
        if ours.recv(1) != b"r":
            raise SystemExit("the writer process did not start")
        self._inbound, self._outbound = await asyncio.open_connection(sock=ours)
        self._answers = asyncio.create_task(self._read_answers())

    async def close(self) -> None:
        """Stop the process once it has answered every batch, then close the store."""
        self._outbound.write(bytes(8))  # size 0: no more
        await self._outbound.drain()
        self._outbound.close()
        self._answers.cancel()
        await asyncio.to_thread(self._process.join)
        await super().close()

    async def commit(self, write: Write) -> Committed:
        """Hand ``write`` to the process as plain rows; make the records from its answer."""
        prepared = sqlite_writes.prepare(write)
        insert: Insert | None = None
        if (new := write.insert) is not None and prepared.insert is not None:
            call = new.tool_call_id if isinstance(new, ApprovalRequest) else None
            keys = (new.session_id, call, new.requested_by, new.idempotency_key)
            insert = (prepared.insert, keys)
        update: Update | None = None
        if write.update is not None and prepared.update is not None:
            update = (prepared.update, prepared.decider, write.update.id)
        audit = [
            (d.action, d.actor, d.request_id, d.from_status, d.to_status, details)
            for d, details in zip(write.audit, prepared.details, strict=True)
        ]
        at = write.at.isoformat()
        events: list[tuple[object, ...]] = [
            (d.type, at, d.request.id, prepared.json(d.request)) for d in write.events
        ]
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append(((insert, update, audit, write.at, events), future))
        self._feed()
        rows, seqs = await future
        self._known.add(
            sqlite_writes.Applied(
                audit=rows,
                seqs=seqs,
                events=write.events,
                at=write.at,
                requests=[(prepared.json(r), r) for r in (write.insert, write.update) if r],
            )
        )
        return Committed(
            events=tuple(
                committed_event(d, seq=seq, at=write.at)
                for seq, d in zip(seqs, write.events, strict=True)
            ),
            audit=tuple(
                committed_entry(d, seq=row[0], at=write.at, prev_hash=row[8], hash=row[9])
                for d, row in zip(write.audit, rows, strict=True)
            ),
        )

    def _feed(self) -> None:
        """Send what is pending, now or once this turn of the loop has run."""
        if self.feeding.at_once:
            self._send_due()
        elif not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._send_due)

    def _send_due(self) -> None:
        self._flush_due = False
        limit = self.feeding.max_batch
        while self._pending and len(self._in_flight) < self.feeding.depth:
            batch, self._pending = self._pending[:limit], self._pending[limit:]
            self._in_flight.append([future for _, future in batch])
            body = pickle.dumps([plan for plan, _ in batch])
            self._outbound.write(len(body).to_bytes(8, "little") + body)

    async def _read_answers(self) -> None:
        while True:
            size = int.from_bytes(await self._inbound.readexactly(8), "little")
            answers = pickle.loads(await self._inbound.readexactly(size))  # noqa: S301 - ours
            futures = self._in_flight.popleft()
            if self._pending:
                self._feed()
            for future, (outcome, value) in zip(futures, answers, strict=True):
                if future.done():
                    continue
                if outcome == "ok":
                    future.set_result(value)
                elif outcome == "duplicate":
                    future.set_exception(DuplicateRequest(value))
                else:
                    future.set_exception(VersionConflict(value))


# -- the run -------------------------------------------------------------------------------


def run(opts: argparse.Namespace) -> None:
    """The three in turns; print their rates and the prototype's loop CPU and process share."""
    feeding = Feeding(opts.depth, opts.max_batch, opts.send_at_once)
    n, callers = opts.lifecycles, opts.concurrency
    seconds = {"plain": 0.0, "thread": 0.0, "process": 0.0}
    loop_cpu = busy = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(opts.rounds):
            names = list(seconds)
            for name in names[k % 3 :] + names[: k % 3]:
                path = Path(tmp) / f"{name}-{k}.db"
                if name == "plain":
                    seconds[name] += n / plain_sqlite(path, n)
                elif name == "thread":
                    seconds[name] += n / asyncio.run(through_service(SQLiteStore(path), n, callers))
                else:
                    store, clock = ProcessStore(path, feeding), CpuClock()
                    seconds[name] += n / asyncio.run(
                        through_service(store, n, callers, timed=clock)
                    )
                    loop_cpu += clock.loop
                    busy += store.busy.value
    total = opts.rounds * n
    base = total / seconds["plain"]
    print(
        f"{opts.rounds} rounds of {n} lifecycles, {callers} callers; the process fed "
        + ("as soon as a write comes" if feeding.at_once else "once a turn of the loop has run")
        + f", {feeding.max_batch} writes a batch at most, {feeding.depth} in flight"
    )
    for name, label in (
        ("plain", "plain sqlite3 loop"),
        ("thread", "signoff, writer thread (the store)"),
        ("process", "signoff, writer process (prototype)"),
    ):
        rate = total / seconds[name]
        print(f"{label:36s} {rate:8.1f} lifecycles/s  ratio {rate / base:.2f}")
    print(
        f"prototype: event loop thread {loop_cpu / total * 1e3:.3f} ms of CPU a lifecycle "
        f"(1.5x the plain loop needs at most {1e3 / (1.5 * base):.3f}); the process busy "
        f"{100 * busy / seconds['process']:.0f}% of its runs"
    )


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifecycles", type=int, default=1000, help="per round and subject")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2, help="batches in flight at most")
    parser.add_argument("--max-batch", type=int, default=32, help="writes a batch at most")
    parser.add_argument(
        "--send-at-once",
        action="store_true",
        help="send as soon as a write comes with room in flight, not once the turn has run",
    )
    run(parser.parse_args())


if __name__ == "__main__":
    main()
