"""What the SQLite store's writer does with one write, and what is made before and after.

:func:`prepare` makes a write's rows, JSON and canonical audit details on the caller's event
loop, as a :class:`Plan`: plain values, so that the writer may be a thread of the process or
a process of its own (``signoff.store.sqlite_writer``) it is handed to. :func:`run_batch`
runs a batch of plans (and nonce checks) in one transaction, each in its own savepoint, with
:class:`Txn` keeping the audit chain's head for the whole transaction; each plan's answer is
its audit rows and event seqs. Both writers run this module's code. Statements set only what
a write moves: what a step costs is mostly the pages its transaction writes to the WAL and
syncs.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import NamedTuple, TypeAlias, TypeVar

from signoff.domain.audit import GENESIS_HASH
from signoff.domain.events import EventDraft
from signoff.domain.jsoncanon import canonical_json
from signoff.domain.requests import ApprovalRequest, Request
from signoff.errors import StoreUnavailable
from signoff.store import tables
from signoff.store.base import DuplicateRequest, GrantsChanged, VersionConflict, Write, to_micros
from signoff.store.sqlite_migrations import MIGRATIONS, SCHEMA_VERSION

__all__ = [
    "BUSY_TIMEOUT_MS",
    "Answer",
    "Applied",
    "Job",
    "Plan",
    "Prepared",
    "Txn",
    "UseNonce",
    "applied",
    "connect",
    "duplicate_row",
    "open_for_writing",
    "prepare",
    "read_grants_version",
    "run_batch",
]

T = TypeVar("T")


BUSY_TIMEOUT_MS = 10_000


def connect(path: Path) -> sqlite3.Connection:
    """A connection to ``path`` with the store's settings (FULL sync, foreign keys, waiting
    up to :data:`BUSY_TIMEOUT_MS` for another writer)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _switch_to_wal(conn: sqlite3.Connection) -> str:
    """``PRAGMA journal_mode = WAL``, tried again while another process holds the file.

    Two processes opening a new file at once both switch it to WAL. That switch needs the
    file to itself and SQLite does not always wait on the busy timeout for it: it may say
    "database is locked" at once, while the other process is only a moment from done.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _migrate(conn: sqlite3.Connection, path: object) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreUnavailable(
                f"{path} has schema version {version}, newer than this signoff "
                f"understands ({SCHEMA_VERSION}); upgrade signoff"
            )
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[number - 1].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def open_for_writing(path: Path) -> sqlite3.Connection:
    """The writer's connection to ``path``: switched to WAL, the schema migrated.

    StoreUnavailable when the file cannot be opened or holds a newer schema.
    """
    try:
        conn = connect(path)
    except (sqlite3.Error, OSError) as exc:
        raise StoreUnavailable(f"cannot open {path}: {exc}") from None
    try:
        mode = _switch_to_wal(conn)
        if str(mode).lower() != "wal":
            raise StoreUnavailable(f"{path}: cannot switch to WAL mode")
        _migrate(conn, path)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, (sqlite3.Error, OSError)):
            raise StoreUnavailable(f"cannot open {path}: {exc}") from None
        raise
    return conn


def read_grants_version(conn: sqlite3.Connection, where: object = "the database") -> int:
    """The grants version (migration 8's one row); StoreUnavailable if the row is gone."""
    row = conn.execute("SELECT version FROM grants_version WHERE id = 1").fetchone()
    if row is None:
        raise StoreUnavailable(
            f"{where}: the grants_version row is missing: the schema was damaged"
        )
    return int(row[0])


_Saved: TypeAlias = tuple[tuple[int, str] | None, bool, int | None]
"""A transaction's head, whether it moved, and its grants version (:meth:`Txn.save`)."""


class Txn:
    """The writer's open transaction: its connection and the audit chain's head.

    The head is read once per transaction and written back once, before the commit,
    instead of read and rewritten by every write of the batch.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._head: tuple[int, str] | None = None
        self._moved = False
        self._grants: int | None = None

    @property
    def head(self) -> tuple[int, str]:
        """The (seq, hash) the next audit entry chains after."""
        if self._head is None:
            row = self.conn.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
            self._head = (int(row[0]), str(row[1])) if row else (0, GENESIS_HASH)
        return self._head

    def move_head(self, seq: int, digest: str) -> None:
        """Chain later entries after (seq, digest); kept when the write's savepoint is."""
        self._head = (seq, digest)
        self._moved = True

    @property
    def grants_version(self) -> int:
        """The grants version, as this transaction has left it so far."""
        if self._grants is None:
            self._grants = read_grants_version(self.conn)
        return self._grants

    def move_grants(self) -> None:
        """Move the grants version on: a write stored grants."""
        version = self.grants_version + 1
        self.conn.execute("UPDATE grants_version SET version = ? WHERE id = 1", (version,))
        self._grants = version

    def save(self) -> _Saved:
        """What :meth:`restore` puts back when a write is rolled back."""
        return self._head, self._moved, self._grants

    def restore(self, saved: _Saved) -> None:
        """Forget what a rolled-back write did to the head and the grants version."""
        self._head, self._moved, self._grants = saved

    def write_head(self) -> None:
        """Store the head, if this transaction's writes moved it."""
        if self._moved and self._head is not None:
            self.conn.execute(
                "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
                self._head,
            )


def duplicate_row(
    conn: sqlite3.Connection,
    session_id: str,
    tool_call_id: str | None,
    requested_by: str,
    idempotency_key: str | None,
) -> tuple[str, str] | None:
    for where, values in tables.duplicate_lookups(
        session_id, tool_call_id, requested_by, idempotency_key
    ):
        row = conn.execute(
            tables.select_sql("requests", "id, data", where, tables.qmarks), values
        ).fetchone()
        if row:
            return str(row[0]), str(row[1])
    return None


_INSERT_REQUEST = tables.insert_sql(tables.REQUESTS, tables.qmarks)
_INSERT_TASK = tables.insert_sql(tables.TASKS, tables.qmarks)
_UPDATE_TASK = tables.update_sql(tables.TASKS, tables.qmarks)
_INSERT_AUDIT = tables.insert_sql(tables.AUDIT, tables.qmarks)
_INSERT_EVENT = "INSERT INTO events (type, at, request_id, data) VALUES (?, ?, ?, ?)"

# A change sets only the columns a change can move. SQLite rewrites the entry of every
# index over a column the SET names, changed or not: setting all fourteen columns
# dirtied ten index pages per step (WAL frames to write and sync), most of them for
# columns fixed at submit (the request's kind, session, tool, requester, keys, creation
# time and searchable text). Who decided is set apart, only when it differs.
_CHANGING = ("status", "version", "expires_us", "data")
_AT = {column: n for n, column in enumerate(tables.REQUESTS.columns)}
_UPDATE_REQUEST = (
    "UPDATE requests SET "  # noqa: S608 - fixed names
    + ", ".join(f"{column} = ?" for column in _CHANGING)
    + " WHERE id = ? AND version = ?"
)
_SET_DECIDER = "UPDATE requests SET decided_by = ? WHERE id = ? AND decided_by IS NOT ?"


Rows: TypeAlias = tuple[tuple[object, ...], ...]


class Plan(NamedTuple):
    """One write as the values of its statements: plain data, all of it made before its
    transaction (a writer process is handed it pickled, as a plain tuple)."""

    at: str
    """When it happens, in ISO form: its audit entries' and events' time."""
    insert: tuple[tuple[object, ...], tuple[str, str | None, str, str | None]] | None = None
    """The new request's row, and the session, tool call id, requester and idempotency key
    its duplicate is looked up by."""
    update: tuple[tuple[object, ...], str | None, str] | None = None
    """The values of :data:`_UPDATE_REQUEST`, who decided, and the request's id."""
    task: tuple[tuple[object, ...], int, str, tuple[str, ...]] | None = None
    """A task's row, version and id, and its pending calls' request ids."""
    replace: tuple[tuple[str, Rows], ...] = ()
    """``INSERT OR REPLACE`` statements, each with its rows."""
    delete: tuple[tuple[str, Rows], ...] = ()
    """``DELETE`` statements, each with its rows of parameters."""
    audit: tuple[tables.AuditFields, ...] = ()
    """The audit entries to chain, in order."""
    events: tuple[tuple[str, str, str, str], ...] = ()
    """The events to append: type, time, request id, the request's JSON."""
    grants_version: int | None = None
    """Stored only while the grants version is this one (Write's ``grants_version``)."""
    moves_grants: bool = False
    """It stores grants: the grants version moves on."""


class UseNonce(NamedTuple):
    """Record ``key`` as used until ``until_us``, forgetting keys past ``now_us``."""

    key: str
    until_us: int
    now_us: int


Job: TypeAlias = Plan | UseNonce
Answer: TypeAlias = tuple[list[tables.AuditRow], list[int]]
"""What running a plan appended: its audit rows, numbered and chained, and its events' seqs."""


class Prepared(NamedTuple):
    """A write as far as it can be made before its transaction."""

    json: tables.RequestJson
    """Each request's JSON, made once for its row and its events."""
    plan: Plan
    """What the writer runs."""


class Applied(NamedTuple):
    """What a committed write appended, as the store remembers it."""

    seqs: list[int]
    """Its events' seqs, in order."""
    events: tuple[EventDraft, ...]
    """Its events' drafts."""
    at: datetime
    """When it happened."""
    requests: list[tuple[str, Request]]
    """The requests it wrote, with their stored JSON."""


def _replacing(table: tables.Table[T], records: tuple[T, ...]) -> tuple[tuple[str, Rows], ...]:
    if not records:
        return ()
    sql = tables.insert_sql(table, tables.qmarks, verb="INSERT OR REPLACE")
    return ((sql, tuple(table.rows(records))),)


def prepare(write: Write) -> Prepared:
    """``write``'s :class:`Plan`: everything but what needs the transaction and the chain's
    head."""
    json = tables.RequestJson()
    insert = None
    if (new := write.insert) is not None:
        call = new.tool_call_id if isinstance(new, ApprovalRequest) else None
        insert = (json.row(new), (new.session_id, call, new.requested_by, new.idempotency_key))
    update = None
    if (request := write.update) is not None:
        values = (
            request.status,
            request.version,
            to_micros(request.expires_at) if request.expires_at else None,
            json(request),
            request.id,
            request.version - 1,
        )
        update = (values, request.decision.decided_by if request.decision else None, request.id)
    task = None
    if (t := write.task) is not None:
        row = tables.TASKS.values(t)
        task = (row, t.version, t.id, tuple(t.request_ids))
    replace = (
        *_replacing(tables.GRANTS, write.grants),
        *_replacing(tables.WEBHOOKS, write.webhooks),
        *_replacing(tables.DELIVERIES, write.deliveries),
        *_replacing(tables.TOKENS, write.tokens),
        *_replacing(tables.SESSIONS, write.sessions),
        *_replacing(tables.ROUTES, write.routes),
        *_replacing(tables.NOTICES, write.notices),
        *_replacing(tables.PERSON_LINKS, write.links),
    )
    delete: list[tuple[str, Rows]] = []
    if write.removed_routes:
        delete.append(
            ("DELETE FROM notify_routes WHERE id = ?", tuple((i,) for i in write.removed_routes))
        )
    if write.removed_links:
        keys = tuple((tables.link_key(*key),) for key in write.removed_links)
        delete.append(("DELETE FROM person_links WHERE id = ?", keys))
    at = write.at.isoformat()
    plan = Plan(
        at=at,
        insert=insert,
        update=update,
        task=task,
        replace=replace,
        delete=tuple(delete),
        audit=tuple(
            tables.audit_fields(draft, canonical_json(draft.details)) for draft in write.audit
        ),
        events=tuple(
            (draft.type, at, draft.request.id, json(draft.request)) for draft in write.events
        ),
        grants_version=write.grants_version,
        moves_grants=bool(write.grants),
    )
    return Prepared(json=json, plan=plan)


def applied(write: Write, prepared: Prepared, answer: Answer) -> Applied:
    """What the store remembers of ``write`` once committed with ``answer``."""
    json = prepared.json
    return Applied(
        seqs=answer[1],
        events=write.events,
        at=write.at,
        requests=[(json(r), r) for r in (write.insert, write.update) if r is not None],
    )


def _insert_request(
    conn: sqlite3.Connection,
    row: tuple[object, ...],
    keys: tuple[str, str | None, str, str | None],
) -> None:
    """Insert a new request; DuplicateRequest names the request it would repeat."""
    existing = duplicate_row(conn, *keys)
    if existing is not None:
        raise DuplicateRequest(existing[0])
    request_id = str(row[0])
    try:
        conn.execute(_INSERT_REQUEST, row)
    except sqlite3.IntegrityError:
        raise DuplicateRequest(request_id) from None
    _index_text(conn, request_id, row[_AT["search"]])


def _index_text(conn: sqlite3.Connection, request_id: str, text: object) -> None:
    """Add a new request's text to the search index, numbered after every request before it
    (a request's text never changes, so it is indexed once)."""
    seq = conn.execute("INSERT INTO request_search (id) VALUES (?)", (request_id,)).lastrowid
    conn.execute("INSERT INTO requests_fts (rowid, search) VALUES (?, ?)", (seq, text))


def _update_request(
    conn: sqlite3.Connection, values: tuple[object, ...], decider: str | None, request_id: str
) -> None:
    """Store a request's next version, if the stored one is the version before it."""
    if conn.execute(_UPDATE_REQUEST, values).rowcount != 1:
        raise VersionConflict(request_id)
    conn.execute(_SET_DECIDER, (decider, request_id, decider))


def _store_task(
    conn: sqlite3.Connection,
    row: tuple[object, ...],
    version: int,
    task_id: str,
    request_ids: tuple[str, ...],
) -> None:
    """Insert a version-1 task or conditionally update it, then index its pending requests."""
    if version == 1:
        try:
            conn.execute(_INSERT_TASK, row)
        except sqlite3.IntegrityError:
            raise VersionConflict(task_id) from None
    elif conn.execute(_UPDATE_TASK, tables.update_values(row, version)).rowcount != 1:
        raise VersionConflict(task_id)
    conn.executemany(
        "INSERT OR REPLACE INTO task_requests (request_id, task_id) VALUES (?, ?)",
        [(request_id, task_id) for request_id in request_ids],
    )


def _append_audit(txn: Txn, plan: Plan) -> list[tables.AuditRow]:
    """Chain the plan's audit entries after the transaction's head, and move the head."""
    if not plan.audit:
        return []
    seq, prev = txn.head
    rows = tables.chain_rows(plan.audit, plan.at, seq, prev)
    txn.conn.executemany(_INSERT_AUDIT, rows)
    txn.move_head(rows[-1][0], rows[-1][9])
    return rows


def _apply(txn: Txn, plan: Plan) -> Answer:
    """Run one plan inside the batch's transaction (and its own savepoint)."""
    conn = txn.conn
    if plan.grants_version is not None and plan.grants_version != txn.grants_version:
        raise GrantsChanged()
    if plan.insert is not None:
        _insert_request(conn, *plan.insert)
    if plan.update is not None:
        _update_request(conn, *plan.update)
    if plan.task is not None:
        _store_task(conn, *plan.task)
    for sql, rows in plan.replace:
        conn.executemany(sql, rows)
    if plan.moves_grants:
        txn.move_grants()
    for sql, rows in plan.delete:
        conn.executemany(sql, rows)
    audit = _append_audit(txn, plan)
    seqs: list[int] = []
    for event in plan.events:
        seq = conn.execute(_INSERT_EVENT, event).lastrowid
        assert seq is not None
        seqs.append(seq)
    return audit, seqs


def _use_nonce(conn: sqlite3.Connection, job: UseNonce) -> bool:
    conn.execute("DELETE FROM nonces WHERE until_us <= ?", (job.now_us,))
    cursor = conn.execute(
        "INSERT INTO nonces (key, until_us) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
        (job.key, job.until_us),
    )
    return cursor.rowcount == 1


Outcome: TypeAlias = tuple[object, BaseException | None]
"""A job's answer, or what it failed with."""


def run_batch(conn: sqlite3.Connection, path: object, jobs: Sequence[Job]) -> list[Outcome]:
    """Run ``jobs`` in one transaction and commit; each job's outcome, in order.

    A job that fails is rolled back alone and fails with what it raised (an SQLite error as
    StoreUnavailable); a failed commit fails every job. Several jobs are first run without
    a savepoint each (two statements a job, a quarter of the writer's CPU in
    bench/writer_process.py): if every one succeeds they commit as they are; if one fails,
    the whole transaction is rolled back and the batch runs again with a savepoint around
    each job, so that only the failing ones are undone.
    """
    if len(jobs) > 1:
        outcomes = _transaction(conn, path, jobs, saving=False)
        if outcomes is not None:
            return outcomes
    outcomes = _transaction(conn, path, jobs, saving=len(jobs) > 1)
    assert outcomes is not None
    return outcomes


def _transaction(
    conn: sqlite3.Connection, path: object, jobs: Sequence[Job], *, saving: bool
) -> list[Outcome] | None:
    """Run ``jobs`` in one transaction: each in a savepoint of its own (``saving``), or
    none; then None, with the transaction rolled back, when one of several failed."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        error = StoreUnavailable(f"cannot write {path}: {exc}")
        return [(None, error) for _ in jobs]
    txn = Txn(conn)
    together = not saving and len(jobs) > 1
    outcomes: list[Outcome] = []
    for job in jobs:
        saved = txn.save()
        if saving:
            conn.execute("SAVEPOINT write")
        try:
            result = _use_nonce(conn, job) if isinstance(job, UseNonce) else _apply(txn, job)
        except BaseException as exc:
            if together:  # the batch runs again, each job in its savepoint
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                return None
            txn.restore(saved)
            if saving:
                conn.execute("ROLLBACK TO write")
                conn.execute("RELEASE write")
            elif conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                exc = StoreUnavailable(f"cannot write {path}: {exc}")
            outcomes.append((None, exc))
        else:
            if saving:
                conn.execute("RELEASE write")
            outcomes.append((result, None))
    if conn.in_transaction:
        try:
            txn.write_head()
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            error = StoreUnavailable(f"cannot commit to {path}: {exc}")
            outcomes = [(None, error) for _ in outcomes]
    return outcomes
