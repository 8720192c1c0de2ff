"""Full request lifecycles per second through the service on SQLite, against plain sqlite3.

A lifecycle is submit, decide, wait, claim, complete. The baseline is a plain ``sqlite3``
loop doing the same writes (the request row, an audit entry and an event per step, one
transaction per step) on the same durability settings (WAL, synchronous=FULL), measured
in the same run. The service is measured with one caller at a time and with many
concurrent callers, whose commits it batches.

A fourth subject measures what no store can take away: the same service on the
in-memory store (``MemoryStore``: no disk, no thread), with one caller and with
``--concurrency`` callers, timed without what it spends inside the store's methods
(wrapped on the instance: its dicts, its duplicate scan, the chain's hashes, the committed
audit entries and events it builds). What is left is the service's own Python per
lifecycle: input validation, transitions, audit drafts, the bus, the bench's waiter. From
it and the plain loop of the same run it prints two ceilings, each holding for any store
whose calls, reads and writes together, cost no more than the plain loop's writes (and
again with the memory store's own work added to that store, a store that must also build
the committed records and the chain):

- one caller: ``plain / (plain + own)``, with ``plain`` the plain loop's seconds per
  lifecycle and ``own`` the service's own seconds per lifecycle with one caller. It
  assumes a durable store spends at least the plain loop's time per lifecycle (the same
  four synced commits) and that none of it overlaps the service's Python: one caller
  awaits each call's commit before it makes the next, and a call's Python runs before
  its commit (validation, the write) or after it (events, the answer).
- ``--concurrency`` callers: ``1 / own CPU``, with ``own CPU`` the process CPU per
  lifecycle (``time.process_time``) of the memory-store run less the store's CPU, as a
  rate and as a ratio to the plain loop. It assumes all of that CPU holds the GIL (pure
  Python on the event loop thread, so the second core cannot run it), and counts nothing
  for the store, so it holds for every store; the store's CPU only lowers it.

Two more subjects measure what the SQLite store's writes cost with no Python around them:
every statement its writer thread ran, with its parameters, is recorded from a run of the
service with one caller and from one with ``--concurrency`` callers (``Recorded``: the
store's connections are made of a recording ``sqlite3.Connection`` subclass), then run
again by a bare loop on a new file with the store's schema and connection settings,
transaction for transaction. They are the same rows, indexes, search index, chain head and
syncs the service's writes make. One caller's replay bounds what any code making these
writes can reach with one caller; it prints ``plain / (replay + own)``, the ceiling once the
service's own time is added.

Two more put those batched statements beside the service, as the store runs them: replayed
bare on a thread while the service runs ``--concurrency`` callers on the memory store on
the event loop thread (``side_by_side``), and again with the statements in a process of
their own. Any SQLite store with a writer thread must do at least both; how much of the
thread's work was done while the service ran says whether the two overlap on two cores or
take turns under the GIL. It prints the rate of the two together as the ceiling for
``--concurrency`` callers with a writer thread, and with a writer process (that one not
charged for handing the process its writes). A tenth charges it (``handed_over``): each
batched transaction is pickled and written to a socket by the event loop while the service
runs there, and the process's answer read back there, as a writer-process store would hand
its writes over.

The service also runs on the store with its writer in a process of its own
(``SQLiteStore(path, writer="process")``, ``signoff serve --sqlite-writer process``), with one
caller and with ``--concurrency``.

The twelve take turns in ``--rounds`` rounds (rotating order, each on a fresh file), so
that other load on the machine, which moves the cost of a disk sync several-fold on a
shared host, falls on all of them alike; each rate is its lifecycles over its time summed
over the rounds. ``--profile`` instead runs the service once with one caller and once with
``--concurrency`` callers under cProfile, counting each thread's own CPU time (the event
loop, the SQLite writer and readers), and prints where it goes.

    python bench/lifecycle.py [--lifecycles 2000] [--concurrency 64] [--rounds 4] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import inspect
import json
import multiprocessing
import multiprocessing.process
import pickle
import pstats
import socket
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from signoff.bus.local import LocalBus
from signoff.domain.principals import Principal
from signoff.service import Service
from signoff.store.base import Store
from signoff.store.memory import MemoryStore
from signoff.store.sqlite import SQLiteStore

AGENT = Principal(name="bench-agent", role="agent")
APPROVER = Principal(name="bench-approver", role="approver")
ARGS = {"command": "ls -la /srv/data", "cwd": "/srv"}


class PlainLoop:
    """A hand-written sqlite3 loop making a lifecycle's writes: the request row, an audit
    entry and an event per step, one durable transaction per step (WAL, synchronous=FULL).
    """

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(
            """
            CREATE TABLE requests (id TEXT PRIMARY KEY, status TEXT, session_id TEXT,
                created_us INTEGER, version INTEGER, data TEXT);
            CREATE INDEX requests_session
                ON requests (session_id, status, created_us DESC, id DESC);
            CREATE TABLE audit (seq INTEGER PRIMARY KEY, request_id TEXT, action TEXT,
                details TEXT, prev_hash TEXT, hash TEXT);
            CREATE TABLE events (seq INTEGER PRIMARY KEY, type TEXT, request_id TEXT, data TEXT);
            """
        )
        self.prev = "0" * 64

    def lifecycle(self, n: int) -> None:
        """Submit, decide, claim and complete request ``n``: four commits."""
        rid = f"req_{n:012d}"
        steps = [
            ("created", "pending"),
            ("decided", "approved"),
            ("status", "executing"),
            ("result", "completed"),
        ]
        db = self.db
        for version, (event, status) in enumerate(steps, start=1):
            data = json.dumps({"id": rid, "status": status, "tool_name": "shell", "args": ARGS})
            details = json.dumps({"args": ARGS, "status": status}, sort_keys=True)
            digest = hashlib.sha256((self.prev + details).encode()).hexdigest()
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
                (rid, event, details, self.prev, digest),
            )
            db.execute(
                "INSERT INTO events (type, request_id, data) VALUES (?, ?, ?)", (event, rid, data)
            )
            db.execute("COMMIT")
            self.prev = digest

    def close(self) -> None:
        """Close the connection."""
        self.db.close()


def plain_sqlite(path: Path, lifecycles: int) -> float:
    """Lifecycles per second of a hand-written sqlite3 loop doing the same writes."""
    loop = PlainLoop(path)
    start = time.perf_counter()
    for n in range(lifecycles):
        loop.lifecycle(n)
    elapsed = time.perf_counter() - start
    loop.close()
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


async def through_service(
    store: Store,
    lifecycles: int,
    concurrency: int,
    *,
    timed: AbstractContextManager[object] | None = None,
) -> float:
    """Lifecycles per second through the service on ``store``, ``concurrency`` at a time
    (``timed``, if given, is entered for the timed part only: the profiler's)."""
    service = Service(store, bus=LocalBus(), read_file=None)
    async with service:
        counter = iter(range(lifecycles))

        async def worker() -> None:
            for n in counter:
                await one_lifecycle(service, n)

        with timed or nullcontext():
            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            elapsed = time.perf_counter() - start
        report = await service.verify_audit()
        assert report.ok, report
    return lifecycles / elapsed


Transactions = list[list[tuple[str, Any, bool]]]
"""Statements with their parameters (and whether ``executemany`` ran them), by transaction."""


WRITER = "signoff-sqlite-writer"
"""The name of the SQLite store's writer thread, whose statements :class:`Recorded` keeps."""


class Recorded:
    """While entered: every statement the SQLite store's writer thread runs, with its
    parameters, grouped into its transactions (``BEGIN IMMEDIATE`` to ``COMMIT``).

    The store's connections are made through ``sqlite3.connect``, which this replaces for
    as long as the object lives with one that makes them of a recording subclass; only the
    writer thread's statements, and only while entered, are kept.
    """

    def __init__(self) -> None:
        self.transactions: Transactions = []
        self._on = False
        recorded = self

        class Recording(sqlite3.Connection):
            def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
                recorded.keep(sql, parameters, many=False)
                return super().execute(sql, parameters)

            def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
                rows = [tuple(row) for row in parameters]
                recorded.keep(sql, rows, many=True)
                return super().executemany(sql, rows)

        self._connect = sqlite3.connect
        connect = self._connect

        def recording_connect(*args: Any, **kw: Any) -> sqlite3.Connection:
            return connect(*args, **kw, factory=Recording)

        sqlite3.connect = recording_connect  # type: ignore[assignment]

    def keep(self, sql: str, parameters: Any, *, many: bool) -> None:
        """Keep one statement of the writer's, while entered."""
        if not self._on or threading.current_thread().name != WRITER:
            return
        if sql == "BEGIN IMMEDIATE":
            self.transactions.append([])
        if self.transactions:
            self.transactions[-1].append((sql, parameters, many))

    def close(self) -> None:
        """Give ``sqlite3.connect`` back."""
        sqlite3.connect = self._connect

    def __enter__(self) -> Recorded:
        self._on = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._on = False


def record(path: Path, lifecycles: int, concurrency: int) -> Transactions:
    """The transactions the SQLite store's writer made for ``lifecycles`` lifecycles with
    ``concurrency`` callers, on a new file at ``path``."""
    recorded = Recorded()
    try:
        asyncio.run(through_service(SQLiteStore(path), lifecycles, concurrency, timed=recorded))
    finally:
        recorded.close()
    return recorded.transactions


def replayed(path: Path, transactions: Transactions) -> float:
    """Seconds a bare sqlite3 loop takes to run ``transactions`` again, statement for
    statement with the same parameters, on a new file with the store's schema, on the
    store's connection settings: the store's writes with no Python around them."""
    db = bare_connection(path)
    try:
        start = time.perf_counter()
        replay(db, transactions, LocalCount())
        return time.perf_counter() - start
    finally:
        db.close()


def bare_connection(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection to a new file at ``path`` with the store's schema, on the
    store's settings (WAL, ``synchronous=FULL``), for the thread that calls this."""

    async def create() -> None:
        store = SQLiteStore(path)
        await store.open()
        await store.close()

    asyncio.run(create())
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA foreign_keys = ON")
    return db


class Count(Protocol):
    """How many transactions a replay has run so far."""

    value: int


def replay(db: sqlite3.Connection, transactions: Transactions, done: Count) -> None:
    """Run ``transactions`` on ``db``, counting each one finished in ``done``."""
    for transaction in transactions:
        for sql, parameters, many in transaction:
            if many:
                db.executemany(sql, parameters)
            else:
                db.execute(sql, parameters)
        done.value += 1


def side_by_side(
    path: Path,
    transactions: Transactions,
    lifecycles: int,
    concurrency: int,
    *,
    process: bool = False,
) -> tuple[float, float]:
    """The least any SQLite store with a writer thread (or, with ``process``, a writer
    process) can take for ``lifecycles``: the store's recorded ``transactions`` replayed bare
    on a thread of their own, as the writer runs them, or in a process of their own, while
    the service runs them on the memory store with ``concurrency`` callers on this thread's
    event loop (its own Python and a store's records, chain and dicts). A process is not
    charged for handing it the writes: what a store would pay for that is left out.

    Returns the seconds until both are done, and the share of the transactions the writer
    had run when the service was done: near 1 if the two overlap, near 0 if they take turns
    (each statement a thread runs needs the GIL back, between the loop's switch intervals).
    """
    context = multiprocessing.get_context("fork")
    ready, go = (
        (context.Event(), context.Event()) if process else (threading.Event(), threading.Event())
    )
    done: Count = context.Value("q", 0) if process else LocalCount()

    def writer() -> None:
        db = bare_connection(path)
        try:
            ready.set()
            go.wait()
            replay(db, transactions, done)
        finally:
            db.close()

    runner: threading.Thread | multiprocessing.process.BaseProcess = (
        context.Process(target=writer, name="bench-bare-writer")
        if process
        else threading.Thread(target=writer, name="bench-bare-writer")
    )
    runner.start()
    ready.wait()
    start = time.perf_counter()
    go.set()
    asyncio.run(through_service(MemoryStore(), lifecycles, concurrency))
    share = done.value / len(transactions)
    runner.join()
    return time.perf_counter() - start, share


def handed_over(
    path: Path, transactions: Transactions, lifecycles: int, concurrency: int
) -> tuple[float, float]:
    """As :func:`side_by_side` with a process, the writer process charged for being handed
    its writes as a store would hand them: each transaction pickled and written to a socket
    by this thread's event loop while the service runs there, and the process's answer (each
    statement's rowid) read back and unpickled there. Every transaction is handed over as
    soon as the run starts, so the process never waits for the loop: what is charged is the
    hand-over's cost to the loop, not the two waiting for each other, and the figure stays a
    ceiling.

    Returns the seconds until both are done, and the share of the answers read when the
    service was done.
    """
    ours, theirs = hand_over_pair()
    process = multiprocessing.get_context("fork").Process(
        target=_write_handed, args=(path, theirs), name="bench-writer-process"
    )
    process.start()
    theirs.close()
    if ours.recv(1) != b"r":
        raise SystemExit("the writer process did not start")

    async def both() -> float:
        reader, writer = await asyncio.open_connection(sock=ours)
        answered = 0

        async def hand_over() -> None:
            nonlocal answered
            for transaction in transactions:
                body = pickle.dumps(transaction)
                writer.write(len(body).to_bytes(8, "little") + body)
            writer.write(bytes(8))  # size 0: no more
            for _ in transactions:
                size = int.from_bytes(await reader.readexactly(8), "little")
                pickle.loads(await reader.readexactly(size))  # noqa: S301 - our own process
                answered += 1
            writer.close()

        handing = asyncio.create_task(hand_over())
        await through_service(MemoryStore(), lifecycles, concurrency)
        share = answered / len(transactions)
        await handing
        return share

    start = time.perf_counter()
    share = asyncio.run(both())
    process.join()
    return time.perf_counter() - start, share


HAND_OVER_BUFFER = 16 << 20
"""The socket buffers :func:`hand_over_pair` asks for; the kernel gives at most
``net.core.wmem_max`` and ``rmem_max`` (doubled)."""


def hand_over_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair, the loop's end sending and the process's receiving through the
    largest buffers the system gives: a round's transactions are several MB, and through the
    default 208 KB the process, having emptied it, waits for the loop's next turn to refill it."""
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, HAND_OVER_BUFFER)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, HAND_OVER_BUFFER)
    return ours, theirs


def _write_handed(path: Path, sock: socket.socket) -> None:
    """The writer process of :func:`handed_over`: runs each transaction it is handed and
    answers each statement's rowid, until it is handed an empty one."""
    db = bare_connection(path)
    stream = sock.makefile("rb")  # reads all it is asked for, or what is left at the end
    try:
        sock.sendall(b"r")
        while size := int.from_bytes(stream.read(8), "little"):
            transaction = pickle.loads(stream.read(size))  # noqa: S301 - our own process
            rowids = []
            for sql, parameters, many in transaction:
                cursor = db.executemany(sql, parameters) if many else db.execute(sql, parameters)
                rowids.append(cursor.lastrowid)
            answer = pickle.dumps(rowids)
            sock.sendall(len(answer).to_bytes(8, "little") + answer)
    finally:
        db.close()
        sock.close()


class LocalCount:
    """A count in this process (``multiprocessing.Value`` is the one a process adds to)."""

    value = 0


class StoreTime:
    """Wall and CPU time spent inside a store's coroutine methods, summed (each is wrapped
    on the instance; a call made from inside another is not counted twice)."""

    def __init__(self, store: Store) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self._depth = 0
        for name in dir(store):
            method = getattr(store, name)
            if not name.startswith("_") and inspect.iscoroutinefunction(method):
                setattr(store, name, self._timed(method))

    def _timed(self, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def timed(*args: Any, **kw: Any) -> Any:
            self._depth += 1
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return await method(*args, **kw)
            finally:
                self._depth -= 1
                if not self._depth:
                    self.wall += time.perf_counter() - wall
                    self.cpu += time.thread_time() - cpu

        return timed


class OwnTime:
    """While entered: the process's CPU time, and the wall and CPU time spent inside the
    store's methods, so that the service's own is the rest."""

    def __init__(self, store: Store) -> None:
        self.inside = StoreTime(store)
        self.process = self.store_wall = self.store_cpu = 0.0

    def __enter__(self) -> OwnTime:
        self.inside.wall = self.inside.cpu = 0.0
        self.process = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.process = time.process_time() - self.process
        self.store_wall, self.store_cpu = self.inside.wall, self.inside.cpu


class Tally:
    """What one subject did over the rounds."""

    def __init__(self) -> None:
        self.count = 0
        """Lifecycles done."""
        self.seconds = 0.0
        """Seconds they took (for the memory store's: less the time inside the store)."""
        self.cpu = 0.0
        """Process CPU seconds less the store's (the memory store's only; else 0)."""
        self.store = 0.0
        """Seconds spent inside the store's methods (the memory store's only; else 0)."""
        self.shares: list[float] = []
        """Side by side only: each round's share of the writer's transactions (a thread's or
        a process's) run while the service ran."""

    def add(self, count: int, seconds: float, cpu: float = 0.0, store: float = 0.0) -> None:
        """Add one round's figures."""
        self.count += count
        self.seconds += seconds
        self.cpu += cpu
        self.store += store

    def add_side_by_side(self, count: int, figures: tuple[float, float]) -> None:
        """Add one round of :func:`side_by_side`: its seconds and its share."""
        seconds, share = figures
        self.add(count, seconds)
        self.shares.append(share)

    def shares_text(self) -> str:
        """Each round's share, as percentages."""
        return ", ".join(f"{100 * share:.0f}%" for share in self.shares)


def through_memory(lifecycles: int, concurrency: int, tally: Tally) -> None:
    """The service on the in-memory store: add its own time and CPU to ``tally``."""
    store = MemoryStore()
    own = OwnTime(store)
    rate = asyncio.run(through_service(store, lifecycles, concurrency, timed=own))
    tally.add(
        lifecycles, lifecycles / rate - own.store_wall, own.process - own.store_cpu, own.store_wall
    )


def run_rounds(tmp: Path, lifecycles: int, concurrency: int, rounds: int) -> dict[str, Tally]:
    """What each of the twelve did over ``rounds`` turns, in rotating order."""
    per_round = max(1, lifecycles // rounds)
    serial = max(1, per_round // 4)
    done = {
        name: Tally()
        for name in (
            "plain",
            "serial",
            "batched",
            "serial, process",
            "batched, process",
            "memory 1",
            "memory n",
            "replay 1",
            "replay n",
            "side by side",
            "side by side, process",
            "handed over",
        )
    }
    # the store's own statements, recorded once from a run of each kind, replayed each round
    alone = record(tmp / "recorded-1.db", serial, 1)
    batches = record(tmp / "recorded-n.db", per_round, concurrency)

    def timed(count: int, rate: float) -> tuple[int, float]:
        return count, count / rate

    runs: dict[str, Callable[[Path], None]] = {
        "plain": lambda path: done["plain"].add(*timed(per_round, plain_sqlite(path, per_round))),
        "serial": lambda path: done["serial"].add(
            *timed(serial, asyncio.run(through_service(SQLiteStore(path), serial, 1)))
        ),
        "batched": lambda path: done["batched"].add(
            *timed(
                per_round,
                asyncio.run(through_service(SQLiteStore(path), per_round, concurrency)),
            )
        ),
        "serial, process": lambda path: done["serial, process"].add(
            *timed(
                serial,
                asyncio.run(through_service(SQLiteStore(path, writer="process"), serial, 1)),
            )
        ),
        "batched, process": lambda path: done["batched, process"].add(
            *timed(
                per_round,
                asyncio.run(
                    through_service(SQLiteStore(path, writer="process"), per_round, concurrency)
                ),
            )
        ),
        "memory 1": lambda path: through_memory(per_round, 1, done["memory 1"]),
        "memory n": lambda path: through_memory(per_round, concurrency, done["memory n"]),
        "replay 1": lambda path: done["replay 1"].add(serial, replayed(path, alone)),
        "replay n": lambda path: done["replay n"].add(per_round, replayed(path, batches)),
        "side by side": lambda path: done["side by side"].add_side_by_side(
            per_round, side_by_side(path, batches, per_round, concurrency)
        ),
        "side by side, process": lambda path: done["side by side, process"].add_side_by_side(
            per_round, side_by_side(path, batches, per_round, concurrency, process=True)
        ),
        "handed over": lambda path: done["handed over"].add_side_by_side(
            per_round, handed_over(path, batches, per_round, concurrency)
        ),
    }
    order = list(runs)
    for n in range(rounds):
        turn = n % len(order)
        for name in order[turn:] + order[:turn]:
            runs[name](tmp / f"{name.replace(' ', '-')}-{n}.db")
    return done


class ThreadProfiles:
    """cProfile over each thread's own CPU time: the event loop's while entered, and every
    thread started from when this is made (the SQLite writer, the readers) until it is
    left; ``stats`` holds both once left."""

    def __init__(self) -> None:
        self.loop = cProfile.Profile(time.thread_time)
        self.threads: list[cProfile.Profile] = []
        self._collecting = True
        threading.setprofile(self._start)

    def _start(self, frame: FrameType, event: str, arg: Any) -> None:
        # the first event of a new thread: from here on, that thread's own profiler
        sys.setprofile(None)
        if self._collecting:
            thread = cProfile.Profile(time.thread_time)
            self.threads.append(thread)
            thread.enable()

    def __enter__(self) -> ThreadProfiles:
        self.loop.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.disable()
        self._collecting = False
        threading.setprofile(None)
        # the threads' figures as they stand now, before verify_audit reads in the readers
        self.stats = (pstats.Stats(self.loop), pstats.Stats(*self.threads))


class CpuClock:
    """The process's CPU time and the event loop thread's own while entered (the rest is
    the other threads': the SQLite writer's, mostly)."""

    def __enter__(self) -> CpuClock:
        self.process, self.loop = time.process_time(), time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.process = time.process_time() - self.process
        self.loop = time.thread_time() - self.loop


def profile(tmp: Path, lifecycles: int, concurrency: int, top: int = 30) -> None:
    """Print the CPU per lifecycle of each thread, then each thread's own CPU time per
    function under cProfile, for 1 and ``concurrency`` callers."""
    for callers, count in ((1, max(1, lifecycles // 4)), (concurrency, lifecycles)):
        clock = CpuClock()
        store = SQLiteStore(tmp / f"clock-{callers}.db")
        rate = asyncio.run(through_service(store, count, callers, timed=clock))
        print(
            f"\n== {callers} caller(s), no profiler: {rate:.1f} lifecycles/s; CPU per lifecycle "
            f"{clock.process / count * 1000:.3f} ms: event loop thread "
            f"{clock.loop / count * 1000:.3f} ms, other threads (the SQLite writer) "
            f"{(clock.process - clock.loop) / count * 1000:.3f} ms"
        )
        profiles = ThreadProfiles()
        store = SQLiteStore(tmp / f"profile-{callers}.db")
        rate = asyncio.run(through_service(store, count, callers, timed=profiles))
        print(f"\n== {callers} caller(s): {rate:.1f} lifecycles/s under the profiler ==")
        for name, stats in zip(
            ("event loop thread", "SQLite writer and reader threads"), profiles.stats, strict=True
        ):
            print(f"-- {name}: own CPU time per function, top {top}")
            stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    """Run the twelve in turns and print lifecycles per second, the ratios and the ceilings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifecycles", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--profile", action="store_true")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if opts.profile:
            profile(Path(tmp), opts.lifecycles, opts.concurrency)
            return
        done = run_rounds(Path(tmp), opts.lifecycles, opts.concurrency, opts.rounds)
    report(done, opts.rounds, opts.concurrency)


def report(done: dict[str, Tally], rounds: int, concurrency: int) -> None:
    """Print the rates, the ratios to the plain loop and the two ceilings."""
    base, serial, batched = (
        done[k].count / done[k].seconds for k in ("plain", "serial", "batched")
    )
    print(
        f"{rounds} rounds, rotating order; lifecycles each: "
        + ", ".join(f"{name} {tally.count}" for name, tally in done.items())
    )
    print(f"plain sqlite3 loop (same writes, one txn per step): {base:9.1f} lifecycles/s")
    print(
        f"signoff service, 1 caller:                          {serial:9.1f} lifecycles/s"
        f"  ratio {serial / base:.2f}  (target >= 0.70)"
    )
    print(
        f"signoff service, {concurrency} concurrent callers:            "
        f"{batched:9.1f} lifecycles/s  ratio {batched / base:.2f}  (target >= 1.50)"
    )
    serial_process, batched_process = (
        done[k].count / done[k].seconds for k in ("serial, process", "batched, process")
    )
    print(
        f"the same, the store's writer a process (--sqlite-writer process): 1 caller "
        f"{serial_process:.1f} lifecycles/s, ratio {serial_process / base:.2f}; "
        f"{concurrency} callers {batched_process:.1f} lifecycles/s, ratio "
        f"{batched_process / base:.2f}"
    )
    one, many = done["memory 1"], done["memory n"]
    plain_ms, own_ms = 1e3 / base, one.seconds / one.count * 1e3
    print(
        f"service on the memory store (its own Python, no disk), 1 caller: "
        f"{one.count / one.seconds:.1f} lifecycles/s, own time {own_ms:.3f} ms a lifecycle "
        f"(the store's {one.store / one.count * 1e3:.3f} ms left out)"
    )
    print(
        f"service on the memory store (its own Python, no disk), {concurrency} callers: "
        f"{many.count / many.seconds:.1f} lifecycles/s, own CPU {many.cpu / many.count * 1e3:.3f}"
        f" ms a lifecycle (the store's {many.store / many.count * 1e3:.3f} ms left out)"
    )
    store_ms, store_cpu = one.store / one.count * 1e3, many.store / many.count * 1e3
    print(
        f"1 caller: ceiling with a store that costs no more than the plain loop: "
        f"{plain_ms / (plain_ms + own_ms):.2f} (target 0.70) = plain {plain_ms:.3f} ms / "
        f"(plain {plain_ms:.3f} + service's own {own_ms:.3f} ms); "
        f"{plain_ms / (plain_ms + own_ms + store_ms):.2f} if the store also does the memory "
        f"store's work ({store_ms:.3f} ms)"
    )
    alone, batches = done["replay 1"], done["replay n"]
    replay_ms = alone.seconds / alone.count * 1e3
    print(
        f"the SQLite store's own statements replayed bare (recorded from a run, then run again "
        f"with the same parameters on a new file: no Python around them), one caller's "
        f"transactions: {alone.count / alone.seconds:.1f} lifecycles/s, ratio "
        f"{1e3 / replay_ms / base:.2f}; {concurrency} callers' batched transactions: "
        f"{batches.count / batches.seconds:.1f} lifecycles/s, ratio "
        f"{batches.count / batches.seconds / base:.2f}"
    )
    print(
        f"1 caller: ceiling with these writes: {plain_ms / (replay_ms + own_ms):.2f} "
        f"(target 0.70) = plain {plain_ms:.3f} ms / (the store's statements alone "
        f"{replay_ms:.3f} + service's own {own_ms:.3f} ms); "
        f"{plain_ms / (replay_ms + own_ms + store_ms):.2f} if the store also does the memory "
        f"store's work ({store_ms:.3f} ms: the chain's hashes, the records it returns)"
    )
    own_cpu = many.cpu / many.count * 1e3
    print(
        f"{concurrency} callers: ceiling with any store, even one that costs nothing: "
        f"{1e3 / own_cpu / base:.2f} (target 1.50) = 1 / service's own CPU {own_cpu:.3f} ms "
        f"= {1e3 / own_cpu:.1f} lifecycles/s, over the plain loop's {base:.1f}/s; "
        f"{1e3 / (own_cpu + store_cpu) / base:.2f} if the store's CPU is the memory store's "
        f"({store_cpu:.3f} ms)"
    )
    beside = done["side by side"]
    beside_rate = beside.count / beside.seconds
    apart = (many.seconds + many.store + batches.seconds) / beside.count * 1e3
    print(
        f"side by side: the {concurrency} callers' batched statements replayed bare on a thread "
        f"while the service runs {concurrency} callers on the memory store on the event loop, "
        f"as a writer thread runs beside the loop: {beside.seconds / beside.count * 1e3:.3f} ms "
        f"a lifecycle until both are done (one after the other: {apart:.3f} ms); the thread had "
        f"run {beside.shares_text()} of its transactions when the service was done"
    )
    print(
        f"{concurrency} callers: ceiling with a writer thread: {beside_rate / base:.2f} "
        f"(target 1.50) = {beside_rate:.1f} lifecycles/s side by side, over the plain loop's "
        f"{base:.1f}/s"
    )
    beside_process = done["side by side, process"]
    print(
        f"{concurrency} callers: the same with the statements in a process of their own (as a "
        f"writer process would run them, not charged for being handed the writes): "
        f"{beside_process.seconds / beside_process.count * 1e3:.3f} ms a lifecycle, the process "
        f"had run {beside_process.shares_text()} when the service was done; ceiling "
        f"{beside_process.count / beside_process.seconds / base:.2f} (target 1.50)"
    )
    handed = done["handed over"]
    ours, theirs = hand_over_pair()
    with ours, theirs:
        buffers = (
            ours.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            theirs.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        )
    print(
        f"{concurrency} callers: the same, the process handed each transaction as a store "
        f"would (pickled and written to a socket by the event loop beside the service, its "
        f"answer read back there; socket buffers {buffers[0] >> 10} and {buffers[1] >> 10} KB): "
        f"{handed.seconds / handed.count * 1e3:.3f} ms a lifecycle, "
        f"{handed.shares_text()} answered when the service was done; ceiling with a writer "
        f"process {handed.count / handed.seconds / base:.2f} (target 1.50)"
    )


if __name__ == "__main__":
    main()
