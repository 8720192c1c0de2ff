"""Pausing a tool call for one approval and resuming it: signoff against LangGraph ``interrupt()``.

One pause+resume, timed from the agent's side:

- **LangGraph**: a one-node ``StateGraph`` compiled with the checkpointer. The node calls
  ``interrupt({...tool call...})`` and, once resumed with an approval, runs the "tool"
  (returns ``"ok"``). One iteration invokes the graph on a new ``thread_id`` until it
  pauses (``ainvoke`` returns the ``__interrupt__``, after the checkpointer has saved the
  checkpoints and the interrupt), then invokes ``Command(resume={"type": "approve"})`` on
  the same thread until the graph completes. Checkpointers: ``AsyncSqliteSaver`` (its own
  setup: WAL, SQLite's default synchronous, which the run prints) and
  ``AsyncPostgresSaver.from_conn_string`` (autocommit connection). Durability is
  LangGraph's default, ``"async"``: ``ainvoke`` still returns only once every save landed.
- **signoff**: ``lifecycle.one_lifecycle`` through ``signoff.service.Service``: the agent
  submits the tool call (the request is stored, pending) and waits; a different principal
  (an approver) decides approve; the agent's wait returns approved; the agent claims the
  request and completes it with the result ``"ok"``. Stores: ``SQLiteStore`` (WAL,
  synchronous=FULL) and ``PostgresStore``. Each step is one transaction writing the request,
  its hash-chained audit entry and its events.
- **the ceiling on SQLite**: ``lifecycle.PlainLoop``, a hand-written sqlite3 loop making the
  same four durable transactions (request row, audit entry, event; WAL, synchronous=FULL)
  and nothing else. What four synced commits cost on this disk bounds what signoff, which
  must make them, can reach against LangGraph; the run prints that bound.
- **the ceiling on PostgreSQL**: ``lifecycle_pg.PlainAsyncpg``, a hand-written asyncpg loop
  making the same four transactions on a fresh database of the same server, durable as the
  server's ``synchronous_commit`` has it (the run prints it).
- **the SQLite store's own statements, replayed bare**: before the timed run, one
  pause+resume at a time through the service on ``SQLiteStore`` with every statement its
  writer thread runs recorded (``lifecycle.record``); in the run, each step runs that
  pause+resume's four transactions again, statement for statement with the same
  parameters, on a plain sqlite3 connection to a file with the store's schema and settings
  (``lifecycle.replay``): signoff's rows, history indexes, search index, chain head and
  syncs, with no Python around them. The run prints ``loop / (replay + own)``, the most any
  code making these writes can reach.
- **the PostgreSQL store's own statements, replayed bare**: before the timed run, every
  statement the store's connections run for each pause+resume, with its parameters, is
  recorded from a run through the service on a fresh database (``lifecycle_pg.record_pg``);
  in the run, each step runs that pause+resume's statements again on one plain asyncpg
  connection to another fresh database with the store's schema
  (``lifecycle_pg.replay_pg``): the same rows, indexes, chain hashes and commits, with no
  Python around them and no follower listening. The run prints ``loop / (replay + own)``.
- **signoff's own time**: ``one_lifecycle`` through the service on the in-memory store
  (``MemoryStore``), each sample less the time spent inside the store's methods
  (``lifecycle.StoreTime``): the service's own Python per pause+resume. With one
  pause+resume at a time each call waits for its commit, so against a store that costs no
  more than the bare loop signoff reaches at most ``loop / (loop + own)`` of that loop
  (mean times; ``lifecycle.py``'s docstring gives the assumptions); the run prints it next
  to what LangGraph's target needs: ``target / (loop / LangGraph)`` of the loop.

All configurations run in this process, each on its own fresh SQLite file or fresh
PostgreSQL database of the same server, one pause+resume at a time. They take turns, one
iteration each per round with the order rotating, so that other load on the machine falls
on all of them alike. Prints median and p99 latency, pause+resumes per second (one at a
time, so 1 / mean latency), the ratios signoff/LangGraph on the same database (latency:
below 1 is faster; throughput: above 1 is faster), then what each side stored per
pause+resume: rows per table, and calls to the store's or checkpointer's write methods.

    python bench/pause_resume.py [--iterations 300] [--warmup 10] [--dsn URL] [--no-pg]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import asyncpg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle import (
    ARGS,
    LocalCount,
    PlainLoop,
    StoreTime,
    Transactions,
    bare_connection,
    one_lifecycle,
    record,
    replay,
)
from lifecycle_pg import (
    DEFAULT_DSN,
    PlainAsyncpg,
    Statements,
    drop_database,
    fresh_database,
    record_pg,
    replay_pg,
)

from signoff.bus.local import LocalBus
from signoff.service import Service
from signoff.store.base import Store
from signoff.store.memory import MemoryStore
from signoff.store.postgres import PostgresStore
from signoff.store.sqlite import SQLiteStore


class ToolState(TypedDict, total=False):
    """The graph's state: the tool call to approve, then its result."""

    tool_call: dict[str, Any]
    result: str


async def approve_then_run(state: ToolState) -> ToolState:
    """Pause for a person's decision on the tool call; run it once approved."""
    decision = interrupt({"tool_call": state["tool_call"]})
    assert decision == {"type": "approve"}, decision
    return {"result": "ok"}


@dataclass
class Subject:
    """One configuration under test: how to run one pause+resume, and what it wrote."""

    label: str
    """Side and database, e.g. ``signoff SQLite``."""
    step: Callable[[int], Awaitable[None]]
    """One pause+resume; the argument is a number unique to the iteration."""
    writes: Counter[str]
    """Calls so far to each write method of the store or checkpointer."""
    rows: Callable[[], Awaitable[dict[str, int]]]
    """Rows now in each table."""
    samples: list[float] = field(default_factory=list)
    """Seconds per timed pause+resume (less ``left_out``'s share)."""
    left_out: StoreTime | None = None
    """If set, the time inside these store methods is left out of ``samples``."""
    left_out_samples: list[float] = field(default_factory=list)
    """Seconds left out of each sample."""


def count_calls(obj: object, names: Sequence[str]) -> Counter[str]:
    """Count calls to the async methods ``names`` of ``obj`` (wrapped on the instance)."""
    counts: Counter[str] = Counter()
    for name in names:
        method = getattr(obj, name)

        async def counted(*args: Any, _method: Any = method, _name: str = name, **kw: Any) -> Any:
            counts[_name] += 1
            return await _method(*args, **kw)

        setattr(obj, name, counted)
    return counts


def sqlite_rows(path: Path) -> Callable[[], Awaitable[dict[str, int]]]:
    """A reader of the row count of each table of a SQLite file."""

    async def rows() -> dict[str, int]:
        db = sqlite3.connect(path)
        try:
            tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            return {t: db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for (t,) in tables}
        finally:
            db.close()

    return rows


def pg_rows(url: str) -> Callable[[], Awaitable[dict[str, int]]]:
    """A reader of the row count of each table in a PostgreSQL database's public schema."""

    async def rows() -> dict[str, int]:
        db = await asyncpg.connect(url)
        try:
            tables = await db.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            return {t[0]: await db.fetchval(f'SELECT count(*) FROM "{t[0]}"') for t in tables}
        finally:
            await db.close()

    return rows


@asynccontextmanager
async def through_signoff(
    label: str, store: Store, rows: Callable[[], Awaitable[dict[str, int]]]
) -> AsyncIterator[Subject]:
    """signoff's pause+resume on ``store``; checks the audit chain on the way out."""
    service = Service(store, bus=LocalBus(), read_file=None)
    async with service:
        commits = count_calls(store, ["commit"])

        async def step(n: int) -> None:
            await one_lifecycle(service, n)

        yield Subject(label, step, commits, rows)
        report = await service.verify_audit()
        assert report.ok, report


PLAIN = "sqlite3 loop (ceiling)"
"""The label of the plain loop's figures."""
PLAIN_PG = "asyncpg loop (ceiling)"
"""The label of the plain asyncpg loop's figures."""
OWN = "signoff own (memory)"
"""The label of the service's own time, on the in-memory store."""
REPLAY = "signoff SQLite, replay"
"""The label of the SQLite store's own statements, replayed bare."""
REPLAY_PG = "signoff PostgreSQL, replay"
"""The label of the PostgreSQL store's own statements, replayed bare."""
STEP_TRANSACTIONS = 4
"""The transactions of one pause+resume: submit, decide, claim, complete."""


@dataclass
class Recording:
    """The SQLite store's statements for every pause+resume of the run, recorded before it
    (``lifecycle.record``), and the bare connection they are replayed on."""

    path: Path
    """The replay's database file (the store's schema and settings)."""
    db: sqlite3.Connection
    """A plain connection to it."""
    transactions: Transactions
    """The recorded transactions, :data:`STEP_TRANSACTIONS` per pause+resume in order."""


@asynccontextmanager
async def through_replay(recording: Recording) -> AsyncIterator[Subject]:
    """The SQLite store's own statements for one pause+resume, replayed bare: the writes
    signoff makes on SQLite (its rows, history indexes, search index, chain head and four
    syncs) with no Python around them."""
    commits: Counter[str] = Counter()
    done = LocalCount()

    async def step(n: int) -> None:
        first = n * STEP_TRANSACTIONS
        replay(recording.db, recording.transactions[first : first + STEP_TRANSACTIONS], done)
        commits["commit"] += STEP_TRANSACTIONS

    try:
        yield Subject(REPLAY, step, commits, sqlite_rows(recording.path))
    finally:
        recording.db.close()


@asynccontextmanager
async def through_replay_pg(url: str, steps: Statements) -> AsyncIterator[Subject]:
    """The PostgreSQL store's own statements for one pause+resume, recorded from a run of
    the service (``lifecycle_pg.record_pg``) and replayed bare on one plain connection to a
    fresh database with the store's schema: its rows, indexes, chain and commits, with no
    Python around them and no follower listening."""
    schema = PostgresStore(url)
    await schema.open()  # the tables, indexes and functions, then nothing else
    await schema.close()
    db = await asyncpg.connect(url)
    commits: Counter[str] = Counter()

    async def step(n: int) -> None:
        await replay_pg(db, steps[n])
        commits["commit"] += STEP_TRANSACTIONS

    try:
        yield Subject(REPLAY_PG, step, commits, pg_rows(url))
    finally:
        await db.close()


@asynccontextmanager
async def through_memory() -> AsyncIterator[Subject]:
    """signoff's pause+resume on the in-memory store, timed without the store's methods."""
    store = MemoryStore()
    own = StoreTime(store)

    async def no_rows() -> dict[str, int]:
        return {}

    async with through_signoff(OWN, store, no_rows) as subject:
        subject.left_out = own
        yield subject


@asynccontextmanager
async def through_plain_pg(url: str) -> AsyncIterator[Subject]:
    """The ceiling of four durable commits on PostgreSQL: a hand-written asyncpg loop making
    a pause+resume's four transactions (request row, audit entry, event each) on the
    server's ``synchronous_commit``, with nothing else."""
    loop = await PlainAsyncpg.create(url)
    level = await loop.db.fetchval("SHOW synchronous_commit")
    print(f"PostgreSQL server: synchronous_commit = {level}")
    commits: Counter[str] = Counter()

    async def step(n: int) -> None:
        await loop.lifecycle(n)
        commits["commit"] += 4

    try:
        yield Subject(PLAIN_PG, step, commits, pg_rows(url))
    finally:
        await loop.close()


@asynccontextmanager
async def through_plain_sqlite(path: Path) -> AsyncIterator[Subject]:
    """The ceiling of four durable commits on SQLite: a hand-written sqlite3 loop making a
    pause+resume's four transactions (request row, audit entry, event each; WAL,
    synchronous=FULL), with nothing else: no service, no validation, no second caller."""
    loop = PlainLoop(path)
    commits: Counter[str] = Counter()

    async def step(n: int) -> None:
        loop.lifecycle(n)
        commits["commit"] += 4

    try:
        yield Subject(PLAIN, step, commits, sqlite_rows(path))
    finally:
        loop.close()


def through_langgraph(
    label: str, saver: BaseCheckpointSaver[Any], rows: Callable[[], Awaitable[dict[str, int]]]
) -> Subject:
    """LangGraph's pause+resume of the interrupting graph, checkpointed by ``saver``."""
    builder = StateGraph(ToolState)
    builder.add_node("approve_then_run", approve_then_run)
    builder.add_edge(START, "approve_then_run")
    builder.add_edge("approve_then_run", END)
    graph = builder.compile(checkpointer=saver)
    saves = count_calls(saver, ["aput", "aput_writes"])

    async def step(n: int) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": f"thread-{n}"}}
        call = {"name": "shell", "args": ARGS, "id": f"call_{n}"}
        paused = await graph.ainvoke({"tool_call": call}, config)
        assert "__interrupt__" in paused, paused
        done = await graph.ainvoke(Command(resume={"type": "approve"}), config)
        assert done["result"] == "ok", done

    return Subject(label, step, saves, rows)


@asynccontextmanager
async def fresh_pg(dsn: str) -> AsyncIterator[str]:
    """A fresh database's URL, dropped on exit."""
    url = await fresh_database(dsn)
    try:
        yield url
    finally:
        await drop_database(dsn, url)


async def subjects(
    stack: AsyncExitStack, opts: argparse.Namespace, recording: Recording
) -> list[Subject]:
    """Open every configuration on its own fresh database; ``stack`` closes and drops them."""
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    path = tmp / "signoff.db"
    out = [
        await stack.enter_async_context(
            through_signoff("signoff SQLite", SQLiteStore(path), sqlite_rows(path))
        )
    ]
    path = tmp / "langgraph.db"
    saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(str(path)))
    await saver.setup()
    async with saver.conn.execute("PRAGMA synchronous") as cur:
        level = await cur.fetchone()
    print(f"LangGraph SQLite saver: PRAGMA synchronous = {level and level[0]} (2: FULL)")
    out.append(through_langgraph("LangGraph SQLite", saver, sqlite_rows(path)))
    out.append(await stack.enter_async_context(through_plain_sqlite(tmp / "plain.db")))
    out.append(await stack.enter_async_context(through_replay(recording)))
    out.append(await stack.enter_async_context(through_memory()))
    if opts.no_pg:
        return out
    url = await stack.enter_async_context(fresh_pg(opts.dsn))
    out.append(
        await stack.enter_async_context(
            through_signoff("signoff PostgreSQL", PostgresStore(url), pg_rows(url))
        )
    )
    url = await stack.enter_async_context(fresh_pg(opts.dsn))
    pg_saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(url))
    await pg_saver.setup()
    out.append(through_langgraph("LangGraph PostgreSQL", pg_saver, pg_rows(url)))
    url = await stack.enter_async_context(fresh_pg(opts.dsn))
    out.append(await stack.enter_async_context(through_plain_pg(url)))
    steps = await record_pg(
        await stack.enter_async_context(fresh_pg(opts.dsn)), opts.warmup + opts.iterations
    )
    url = await stack.enter_async_context(fresh_pg(opts.dsn))
    out.append(await stack.enter_async_context(through_replay_pg(url, steps)))
    return out


def recorded(tmp: Path, steps: int) -> Recording:
    """The SQLite store's transactions for ``steps`` pause+resumes, one at a time, recorded
    from a run of the service on a file of its own; and a bare connection to replay them on.
    (Both run their own event loop: called before the timed run's.)"""
    transactions = record(tmp / "recorded.db", steps, 1)
    if len(transactions) != steps * STEP_TRANSACTIONS:
        raise SystemExit(
            f"recorded {len(transactions)} transactions for {steps} pause+resumes, "
            f"not {STEP_TRANSACTIONS} each: the replay would not match the steps"
        )
    path = tmp / "replay.db"
    return Recording(path, bare_connection(path), transactions)


async def run(opts: argparse.Namespace, recording: Recording) -> None:
    """Time every configuration, in rotating turns, and report."""
    async with AsyncExitStack() as stack:
        subs = await subjects(stack, opts, recording)
        for n in range(opts.warmup + opts.iterations):
            turn = n % len(subs)
            for sub in subs[turn:] + subs[:turn]:
                inside = sub.left_out.wall if sub.left_out else 0.0
                start = time.perf_counter()
                await sub.step(n)
                elapsed = time.perf_counter() - start
                inside = (sub.left_out.wall if sub.left_out else 0.0) - inside
                if n >= opts.warmup:
                    sub.samples.append(elapsed - inside)
                    sub.left_out_samples.append(inside)
        stored = {sub.label: await sub.rows() for sub in subs}
    report(subs, stored, opts.warmup + opts.iterations)


def report(subs: list[Subject], stored: dict[str, dict[str, int]], total: int) -> None:
    """Print the table, the ratios and what each side stored per pause+resume."""
    print(f"\n{len(subs[0].samples)} pause+resumes each, one at a time")
    width = max(len(sub.label) for sub in subs)
    print(f"{'':{width}} {'median ms':>10} {'p99 ms':>10} {'per second':>11}")
    figures: dict[str, tuple[float, float, float]] = {}
    for sub in subs:
        median = statistics.median(sub.samples)
        p99 = statistics.quantiles(sub.samples, n=100, method="inclusive")[98]
        rate = len(sub.samples) / sum(sub.samples)
        figures[sub.label] = (median, p99, rate)
        print(f"{sub.label:{width}} {median * 1e3:10.2f} {p99 * 1e3:10.2f} {rate:11.1f}")
    print()
    for db in ("SQLite", "PostgreSQL"):
        if f"signoff {db}" in figures and f"LangGraph {db}" in figures:
            ours, theirs = figures[f"signoff {db}"], figures[f"LangGraph {db}"]
            print(
                f"signoff/LangGraph on {db}: median latency {ours[0] / theirs[0]:.2f}, "
                f"p99 {ours[1] / theirs[1]:.2f}, throughput {ours[2] / theirs[2]:.2f}"
            )
    own = next((sub for sub in subs if sub.label == OWN), None)
    for db, loop, target in (("SQLite", PLAIN, 5.0), ("PostgreSQL", PLAIN_PG, 2.0)):
        if loop in figures and f"LangGraph {db}" in figures and f"signoff {db}" in figures:
            plain_rate, our_rate = figures[loop][2], figures[f"signoff {db}"][2]
            ceiling = plain_rate / figures[f"LangGraph {db}"][2]
            print(
                f"ceiling on {db}: four durable commits alone run {ceiling:.2f}x LangGraph's "
                f"throughput; signoff reaches {our_rate / plain_rate:.2f} of that loop"
            )
            if own is not None:
                plain_ms = 1e3 / plain_rate
                own_ms = statistics.fmean(own.samples) * 1e3
                store_ms = statistics.fmean(own.left_out_samples) * 1e3
                print(
                    f"  {target:.0f}x LangGraph needs >= {target / ceiling:.2f} of that loop; "
                    f"with a store that costs no more than the loop, signoff reaches at most "
                    f"{plain_ms / (plain_ms + own_ms):.2f} = loop {plain_ms:.3f} ms / (loop "
                    f"{plain_ms:.3f} + service's own {own_ms:.3f} ms); "
                    f"{plain_ms / (plain_ms + own_ms + store_ms):.2f} if the store also does "
                    f"the memory store's work ({store_ms:.3f} ms)"
                )
                replayed = {"SQLite": REPLAY, "PostgreSQL": REPLAY_PG}[db]
                if replayed in figures:
                    replay_ms = 1e3 / figures[replayed][2]
                    print(
                        f"  with the {db} store's own statements (replayed bare: "
                        f"{replay_ms:.3f} ms, {plain_ms / replay_ms:.2f} of the loop's rate), "
                        f"signoff reaches at most {plain_ms / (replay_ms + own_ms):.2f} = loop "
                        f"{plain_ms:.3f} ms / (statements {replay_ms:.3f} + service's own "
                        f"{own_ms:.3f} ms); "
                        f"{plain_ms / (replay_ms + own_ms + store_ms):.2f} with the memory "
                        "store's work"
                    )
    print("\nstored per pause+resume (rows per table; calls to write methods)")
    for sub in subs:
        # Tables that grew with the work; schema bookkeeping holds fewer rows than that.
        rows = ", ".join(
            f"{t} {c / total:.1f}" for t, c in sorted(stored[sub.label].items()) if c >= total
        )
        calls = ", ".join(f"{m} {c / total:.1f}" for m, c in sub.writes.items())
        print(f"{sub.label:{width}} rows: {rows or '(in memory)'}; calls: {calls}")


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--no-pg", action="store_true", help="only the SQLite pair")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        recording = recorded(Path(tmp), opts.warmup + opts.iterations)
        asyncio.run(run(opts, recording))


if __name__ == "__main__":
    main()
