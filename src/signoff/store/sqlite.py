"""The embedded SQLite store: signoff's default, one file, safe for several processes.

Durability: WAL with ``synchronous=FULL``, so a write is on disk before it is
acknowledged. Throughput: one writer (a thread, or with ``writer="process"`` a process of
its own, :mod:`~signoff.store.sqlite_writer`) owns the write connection and commits
whatever writes are queued together in one transaction (group commit); when one of
several fails, the transaction is undone and run again with each write inside its own
savepoint, so a failing write is rolled back alone (``sqlite_writes.run_batch``); the audit
chain's head is read and stored once per transaction, and each caller's event loop is
woken once per transaction. What a step costs is mostly the pages its transaction
writes to the WAL and syncs, so a change sets only the columns a change moves. Reads
never wait for the writer (WAL): lookups by key run on the caller's thread, since they
take microseconds, less than a hop to another thread; scans and pages run in a small
thread pool. A write's rows and JSON are made on the caller's event loop before it is
queued, so the writer runs statements and the chain's hashes only; the requests
and events this store just wrote are read back as the records it wrote, not parsed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeVar, cast

from signoff.domain.audit import AuditEntry, LogCoverage, committed_entry
from signoff.domain.events import Event, EventDraft, committed_event
from signoff.domain.grants import Grant
from signoff.domain.notify import LinkKind, Notice, PersonLink, Route
from signoff.domain.principals import TokenRecord
from signoff.domain.requests import Request, stored_request
from signoff.domain.sessions import SessionRecord
from signoff.domain.tasks import Task, TaskStatus
from signoff.domain.webhooks import Delivery, DeliveryStatus, Webhook
from signoff.errors import InvalidRequest, SignoffError, StoreUnavailable
from signoff.store import tables
from signoff.store.base import (
    Committed,
    GrantsRead,
    Page,
    RequestQuery,
    Write,
    lapsed_among,
    to_micros,
)
from signoff.store.sqlite_writer import WriterProcess
from signoff.store.sqlite_writes import (
    Answer,
    Applied,
    Job,
    Prepared,
    UseNonce,
    applied,
    connect,
    duplicate_row,
    open_for_writing,
    prepare,
    read_grants_version,
    run_batch,
)

__all__ = ["SQLiteStore", "WriterKind", "sqlite_path_from_url"]

WriterKind: TypeAlias = Literal["thread", "process"]

T = TypeVar("T")

_BATCH_LIMIT = 256


def sqlite_path_from_url(url: str) -> Path:
    """The file of ``sqlite:///relative/path`` or ``sqlite:////absolute/path``."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise InvalidRequest(
            f"not a SQLite URL: {url!r}; use sqlite:///relative/path or sqlite:////absolute/path"
        )
    return Path(url[len(prefix) :]).expanduser()


def _create_private(path: Path) -> None:
    """Make the database's directory (0700) and an empty database file (0600), if missing.

    Before any data is written, so nothing is ever readable by others. SQLite creates the
    ``-wal`` and ``-shm`` files with the database file's permissions, so they are 0600 too.
    Existing files keep their modes (``signoff serve`` warns when others can read them).
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.close(fd)


@dataclass
class _Job:
    work: Job
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    written: tuple[Write, Prepared] | None = None
    """The write a plan was made of, remembered once committed."""


_Outcome = tuple[asyncio.Future[Any], Any, BaseException | None]

_KNOWN = 4096
"""How many recently written requests and events a store keeps parsed, at most..."""
_KNOWN_TEXT = 8_000_000
"""...and how much of their JSON text (a request with a large file preview counts large)."""


class _Known:
    """The requests and events this store wrote lately, as the records they were made from.

    A read that finds a row holding exactly the text written for it returns the record
    instead of parsing and validating the text again: the follower reads back every event
    this process wrote, and a waiter reads the request just submitted. Rows written by
    other processes, or changed since, are parsed as before. The writer thread adds what a
    transaction wrote once it committed (before its callers hear of it), readers what they
    parsed, each by single dict operations (atomic); the limits bound its memory whatever
    the requests hold.
    """

    def __init__(self) -> None:
        self.requests: dict[str, tuple[str, Request]] = {}
        self.events: dict[int, tuple[EventDraft, datetime]] = {}
        """An event's draft and commit time by seq: the event is made from them on a read."""
        self._text = 0

    def _room(self, text: int) -> None:
        """Forget everything when ``text`` more characters would pass the limits."""
        self._text += text
        if self._text > _KNOWN_TEXT or max(len(self.requests), len(self.events)) > _KNOWN:
            self.requests, self.events, self._text = {}, {}, text

    def add(self, applied: Applied) -> None:
        """Remember what a committed write wrote (its events carry its requests)."""
        self._room(sum(len(text) for text, _ in applied.requests))
        for text, request in applied.requests:
            self.requests[request.id] = (text, request)
        for seq, draft in zip(applied.seqs, applied.events, strict=True):
            self.events[seq] = (draft, applied.at)

    def event(self, row: Sequence[Any]) -> Event:
        """The event a row of ``seq, type, at, data`` holds: made from what was written as
        it, or parsed (an event never changes once written)."""
        known = self.events.get(row[0])
        if known is None:
            return tables.event_from_row(row)
        draft, at = known
        return committed_event(draft, seq=row[0], at=at)

    def request(self, text: str) -> Request:
        """The request ``text`` holds, parsed; remembered for the next read of the same."""
        parsed = stored_request(text)
        self._room(len(text))
        self.requests[parsed.id] = (text, parsed)
        return parsed


def _resolve(outcomes: list[_Outcome]) -> None:
    """Settle a batch's futures of one event loop (one wake-up of that loop per batch)."""
    for future, result, error in outcomes:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


class SQLiteStore:
    """A :class:`~signoff.store.base.Store` in one SQLite file."""

    def __init__(self, path: str | Path, *, writer: WriterKind = "thread") -> None:
        """``writer``: what runs the writes' statements, a thread of this process or a
        process of its own (:mod:`~signoff.store.sqlite_writer`: for many concurrent writers
        on a busy event loop)."""
        if writer not in ("thread", "process"):
            raise InvalidRequest(f"a SQLite writer is a thread or a process, not {writer!r}")
        self.path = Path(path)
        self.writer: WriterKind = writer
        self._process: WriterProcess | None = None
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._read_conns: list[sqlite3.Connection] = []
        self._read_lock = threading.Lock()
        self._lookup_conn: sqlite3.Connection | None = None
        self._known = _Known()

    @property
    def writer_pid(self) -> int | None:
        """The writer process's id while the store is open with one; None otherwise."""
        return self._process.pid if self._process is not None else None

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Create the file if needed, switch to WAL and migrate the schema."""
        if self._writer is not None or self._process is not None:
            return
        try:
            _create_private(self.path)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create {self.path}: {exc}") from None
        if self.writer == "process":
            process = WriterProcess(self.path)
            await process.start()
            self._process = process
        else:
            await self._start_thread()
        self._readers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="signoff-sqlite-read")
        self._lookup_conn = connect(self.path)
        self._lookup_conn.execute("PRAGMA query_only = ON")

    async def _start_thread(self) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writer = threading.Thread(
            target=self._writer_main,
            args=(ready, asyncio.get_running_loop()),
            name="signoff-sqlite-writer",
            daemon=True,
        )
        self._writer.start()
        try:
            await ready
        except BaseException:
            self._writer.join()
            self._writer = None
            raise

    async def close(self) -> None:
        """Finish queued writes, then close every connection."""
        if self._process is not None:
            await self._process.stop()
            self._process = None
        if self._writer is not None:
            self._jobs.put(None)
            await asyncio.to_thread(self._writer.join)
            self._writer = None
        if self._readers is not None:
            self._readers.shutdown(wait=True)
            self._readers = None
        with self._read_lock:
            for conn in self._read_conns:
                conn.close()
            self._read_conns.clear()
        if self._lookup_conn is not None:
            self._lookup_conn.close()
            self._lookup_conn = None
        self._local = threading.local()

    # -- the writer thread ---------------------------------------------------------------

    def _writer_main(self, ready: asyncio.Future[None], loop: asyncio.AbstractEventLoop) -> None:
        opened: _Outcome = (ready, None, None)
        try:
            conn = open_for_writing(self.path)
        except SignoffError as exc:
            opened = (ready, None, exc)
        loop.call_soon_threadsafe(_resolve, [opened])
        if opened[2] is not None:
            return
        try:
            while True:
                first = self._jobs.get()
                if first is None:
                    return
                batch = [first]
                while len(batch) < _BATCH_LIMIT:
                    try:
                        nxt = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        self._jobs.put(None)
                        break
                    batch.append(nxt)
                self._run_batch(conn, batch)
        finally:
            conn.close()

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Job]) -> None:
        """Run the batch's jobs in one transaction (:func:`run_batch`), remember what the
        committed writes wrote, then tell each caller's loop its outcomes at once."""
        outcomes = run_batch(conn, self.path, [job.work for job in batch])
        for job, (answer, error) in zip(batch, outcomes, strict=True):
            if error is None and job.written is not None:
                self._remember(*job.written, cast(Answer, answer))
        self._settle([(job, *outcome) for job, outcome in zip(batch, outcomes, strict=True)])

    def _remember(self, write: Write, prepared: Prepared, answer: Answer) -> None:
        self._known.add(applied(write, prepared, answer))

    @staticmethod
    def _settle(outcomes: list[tuple[_Job, Any, BaseException | None]]) -> None:
        """Hand each caller's loop its outcomes: one call (one wake-up) per loop."""
        by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
        for job, result, error in outcomes:
            by_loop.setdefault(job.loop, []).append((job.future, result, error))
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the caller's loop has closed
                loop.call_soon_threadsafe(_resolve, settled)

    async def _write(self, work: Job, written: tuple[Write, Prepared] | None = None) -> Any:
        if self._process is not None:
            done = None if written is None else partial(self._remember, *written)
            return await self._process.run(work, done)
        if self._writer is None:
            raise StoreUnavailable("the store is not open")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put(_Job(work, future, loop, written))
        return await future

    # -- reads ---------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._read_lock:
                self._read_conns.append(conn)
        return conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._readers is None:
            raise StoreUnavailable("the store is not open")

        def call() -> T:
            try:
                return fn(self._reader())
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"cannot read {self.path}: {exc}") from None

        return await asyncio.get_running_loop().run_in_executor(self._readers, call)

    def _lookup(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._lookup_conn is None:
            raise StoreUnavailable("the store is not open")
        try:
            return fn(self._lookup_conn)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot read {self.path}: {exc}") from None

    def _lookup_one(self, parse: Callable[[Any], T], sql: str, *params: object) -> T | None:
        """The record the first row's one column holds, looked up on the caller's thread."""

        def q(conn: sqlite3.Connection) -> T | None:
            row = conn.execute(sql, params).fetchone()
            return parse(row[0]) if row else None

        return self._lookup(q)

    def _lookup_all(self, parse: Callable[[Any], T], sql: str, *params: object) -> list[T]:
        """The records the rows' one column holds, looked up on the caller's thread."""
        return self._lookup(lambda conn: [parse(r[0]) for r in conn.execute(sql, params)])

    async def _read_all(self, parse: Callable[[Any], T], sql: str, *params: object) -> list[T]:
        """The records the rows' one column holds, read in the reader pool."""
        return await self._read(lambda conn: [parse(r[0]) for r in conn.execute(sql, params)])

    # -- the protocol --------------------------------------------------------------------

    async def commit(self, write: Write) -> Committed:
        """Apply ``write`` atomically (batched with other writes queued at the same time).

        Its rows are made here, on the caller's loop, while the writer runs other writes'
        statements; the records of what it appended are made here once committed.
        """
        prepared = prepare(write)
        rows, seqs = await self._write(prepared.plan, (write, prepared))
        at = write.at
        events = tuple(
            committed_event(draft, seq=seq, at=at)
            for seq, draft in zip(seqs, write.events, strict=True)
        )
        audit = tuple(
            committed_entry(draft, seq=row[0], at=at, prev_hash=row[8], hash=row[9])
            for draft, row in zip(write.audit, rows, strict=True)
        )
        return Committed(events=events, audit=audit)

    async def get_request(self, request_id: str) -> Request | None:
        """The request, or None."""

        def q(conn: sqlite3.Connection) -> Request | None:
            row = conn.execute("SELECT data FROM requests WHERE id = ?", (request_id,)).fetchone()
            if row is None:
                return None
            # parsed only if this store did not write (or read) this very text lately
            known = self._known.requests.get(request_id)
            if known is not None and known[0] == row[0]:
                return known[1]
            return self._known.request(row[0])

        return self._lookup(q)

    async def find_duplicate(
        self,
        *,
        session_id: str,
        tool_call_id: str | None,
        requested_by: str,
        idempotency_key: str | None,
    ) -> Request | None:
        """The request the same call or idempotency key created, if any."""

        def q(conn: sqlite3.Connection) -> Request | None:
            row = duplicate_row(conn, session_id, tool_call_id, requested_by, idempotency_key)
            return stored_request(row[1]) if row else None

        return self._lookup(q)

    async def list_requests(self, query: RequestQuery) -> Page:
        """Requests newest first, by keyset on (created_us, id)."""
        page = tables.request_page_sql(query, tables.qmarks, fts=True)

        def q(conn: sqlite3.Connection) -> Page:
            rows = conn.execute(page.sql, page.params).fetchall()
            return tables.request_page(rows, page.limit)

        return await self._read(q)

    async def due_requests(self, now: datetime, limit: int = 100) -> list[Request]:
        """Pending requests past their expiry, oldest expiry first."""
        return await self._read_all(
            stored_request,
            "SELECT data FROM requests WHERE status = 'pending' AND expires_us IS NOT NULL "
            "AND expires_us <= ? ORDER BY expires_us LIMIT ?",
            to_micros(now),
            limit,
        )

    async def lapsed_claims(self, now: datetime, limit: int = 100) -> list[Request]:
        """Executing calls whose claim's lease ended, oldest lease first."""

        def q(conn: sqlite3.Connection) -> list[Request]:
            # the status index finds the few calls executing at once
            rows = conn.execute("SELECT data FROM requests WHERE status = 'executing'").fetchall()
            return lapsed_among((stored_request(r[0]) for r in rows), now, limit)

        return await self._read(q)

    async def get_grant(self, grant_id: str) -> Grant | None:
        """The grant, or None."""
        return self._lookup_one(
            Grant.model_validate_json, "SELECT data FROM grants WHERE id = ?", grant_id
        )

    async def list_grants(
        self, *, tool_name: str | None = None, requested_by: str | None = None
    ) -> list[Grant]:
        """Grants, newest first."""
        where, params = [], []
        if tool_name is not None:
            where.append("tool_name = ?")
            params.append(tool_name)
        if requested_by is not None:
            where.append("requested_by = ?")
            params.append(requested_by)
        sql = (
            "SELECT data FROM grants"  # noqa: S608
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY created_us DESC, id DESC"
        )
        return self._lookup_all(Grant.model_validate_json, sql, *params)

    async def grants_for(self, tool_name: str, requested_by: str) -> GrantsRead:
        """This tool and requester's grants, newest first, and the grants version read just
        before them (two reads: a grant stored between them moved the version on)."""

        def read(conn: sqlite3.Connection) -> GrantsRead:
            version = read_grants_version(conn, self.path)
            rows = conn.execute(
                "SELECT data FROM grants WHERE tool_name = ? AND requested_by = ? "
                "ORDER BY created_us DESC, id DESC",
                (tool_name, requested_by),
            )
            return GrantsRead(version, tuple(Grant.model_validate_json(r[0]) for r in rows))

        return self._lookup(read)

    async def find_token(self, token_hash: str) -> TokenRecord | None:
        """The token with this hash, or None."""
        return self._lookup_one(
            TokenRecord.model_validate_json,
            "SELECT data FROM tokens WHERE token_hash = ?",
            token_hash,
        )

    async def get_token(self, token_id: str) -> TokenRecord | None:
        """The token with this id, or None."""
        return self._lookup_one(
            TokenRecord.model_validate_json, "SELECT data FROM tokens WHERE id = ?", token_id
        )

    async def list_tokens(self) -> list[TokenRecord]:
        """All tokens, oldest first."""
        return await self._read_all(
            TokenRecord.model_validate_json, "SELECT data FROM tokens ORDER BY created_us, id"
        )

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The inbox session, or None."""
        return self._lookup_one(
            SessionRecord.model_validate_json, "SELECT data FROM sessions WHERE id = ?", session_id
        )

    async def list_audit(
        self, *, request_id: str | None = None, after_seq: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        """Audit entries in chain order (the order they are stored in)."""
        sql = f"SELECT {tables.AUDIT.column_list} FROM audit WHERE seq > ?"  # noqa: S608
        params: list[object] = [after_seq]
        if request_id is not None:
            sql += " AND request_id = ?"
            params.append(request_id)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)

        def q(conn: sqlite3.Connection) -> list[AuditEntry]:
            return [tables.audit_entry(r) for r in conn.execute(sql, params)]

        return await self._read(q)

    async def audit_head(self) -> tuple[int, str] | None:
        """The (seq, hash) kept beside the log."""

        def q(conn: sqlite3.Connection) -> tuple[int, str] | None:
            row = conn.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
            return (int(row[0]), str(row[1])) if row else None

        return self._lookup(q)

    async def audit_coverage(self, sample: int = 5) -> LogCoverage:
        """Counted in one read transaction, so the figures agree with each other."""

        def q(conn: sqlite3.Connection) -> LogCoverage:
            conn.execute("BEGIN")
            try:
                return _coverage(conn, sample)
            finally:
                conn.execute("COMMIT")

        return await self._read(q)

    async def list_events(self, *, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        """Events after ``after_seq``, in order."""

        def q(conn: sqlite3.Connection) -> list[Event]:
            rows = conn.execute(
                "SELECT seq, type, at, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                (after_seq, limit),
            )
            return [self._known.event(r) for r in rows]

        return await self._read(q)

    async def last_event_seq(self) -> int:
        """The newest event's seq (0 when none)."""

        def q(conn: sqlite3.Connection) -> int:
            return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])

        return self._lookup(q)

    async def list_webhooks(self) -> list[Webhook]:
        """Webhook endpoints, oldest first."""
        return self._lookup_all(
            Webhook.model_validate_json, "SELECT data FROM webhooks ORDER BY created_us, id"
        )

    async def get_delivery(self, delivery_id: str) -> Delivery | None:
        """One delivery, or None."""
        return self._lookup_one(
            Delivery.model_validate_json, "SELECT data FROM deliveries WHERE id = ?", delivery_id
        )

    async def list_deliveries(
        self, *, status: DeliveryStatus | None = None, limit: int = 100
    ) -> list[Delivery]:
        """Deliveries, newest first."""
        where = "WHERE status = ? " if status is not None else ""
        params: list[object] = [status] if status is not None else []
        return await self._read_all(
            Delivery.model_validate_json,
            f"SELECT data FROM deliveries {where}"  # noqa: S608 - a fixed clause
            "ORDER BY created_us DESC, event_seq DESC, id DESC LIMIT ?",
            *params,
            limit,
        )

    async def due_deliveries(self, now: datetime, limit: int = 100) -> list[Delivery]:
        """Pending deliveries whose next attempt is due, oldest first, in event order."""
        return await self._read_all(
            Delivery.model_validate_json,
            "SELECT data FROM deliveries WHERE status = 'pending' AND next_attempt_us <= ? "
            "ORDER BY next_attempt_us, event_seq, id LIMIT ?",
            to_micros(now),
            limit,
        )

    async def list_routes(self) -> list[Route]:
        """Stored notification routes, oldest first."""
        return await self._read_all(
            Route.model_validate_json, "SELECT data FROM notify_routes ORDER BY created_us, id"
        )

    async def list_links(self) -> list[PersonLink]:
        """Person links, oldest first."""
        return await self._read_all(
            PersonLink.model_validate_json, "SELECT data FROM person_links ORDER BY created_us, id"
        )

    async def get_link(self, kind: LinkKind, external_id: str) -> PersonLink | None:
        """The link of this Slack user id or email address, or None."""
        return self._lookup_one(
            PersonLink.model_validate_json,
            "SELECT data FROM person_links WHERE id = ?",
            tables.link_key(kind, external_id),
        )

    async def list_notices(
        self, *, route_id: str | None = None, request_id: str | None = None, limit: int = 100
    ) -> list[Notice]:
        """Notices, newest first, of one route and/or one request if given."""
        return await self._read_all(
            Notice.model_validate_json,
            "SELECT data FROM notices WHERE (? IS NULL OR route_id = ?) "
            "AND (? IS NULL OR request_id = ?) ORDER BY created_us DESC, id DESC LIMIT ?",
            route_id,
            route_id,
            request_id,
            request_id,
            limit,
        )

    async def due_notices(self, now: datetime, limit: int = 100) -> list[Notice]:
        """Pending notices whose next attempt is due, oldest due first."""
        return await self._read_all(
            Notice.model_validate_json,
            "SELECT data FROM notices WHERE status = 'pending' AND next_attempt_us <= ? "
            "ORDER BY next_attempt_us, id LIMIT ?",
            to_micros(now),
            limit,
        )

    async def use_nonce(self, key: str, until: datetime, now: datetime) -> bool:
        """Record ``key`` as used until ``until``; False if it already was."""

        return bool(await self._write(UseNonce(key, to_micros(until), to_micros(now))))

    async def get_task(self, task_id: str) -> Task | None:
        """The task, or None."""
        return self._lookup_one(
            Task.model_validate_json, "SELECT data FROM tasks WHERE id = ?", task_id
        )

    async def find_task(self, request_id: str) -> Task | None:
        """The task that filed this request, or None."""
        return self._lookup_one(
            Task.model_validate_json,
            "SELECT t.data FROM task_requests AS r JOIN tasks AS t ON t.id = r.task_id "
            "WHERE r.request_id = ?",
            request_id,
        )

    async def list_tasks(self, *, status: TaskStatus | None = None, limit: int = 100) -> list[Task]:
        """Tasks, newest first by (created_us, id)."""
        where = "WHERE status = ? " if status is not None else ""
        params: list[object] = [status] if status is not None else []
        return await self._read_all(
            Task.model_validate_json,
            f"SELECT data FROM tasks {where}"  # noqa: S608 - a fixed clause
            "ORDER BY created_us DESC, id DESC LIMIT ?",
            *params,
            limit,
        )


def _coverage(conn: sqlite3.Connection, sample: int) -> LogCoverage:
    """The figures behind :meth:`SQLiteStore.audit_coverage`."""
    submitted = "SELECT 1 FROM audit a WHERE a.request_id = {} AND a.action = 'submit'"
    requests = conn.execute("SELECT count(*) FROM requests").fetchone()[0]
    unaudited = conn.execute(
        f"SELECT id FROM requests r WHERE NOT EXISTS ({submitted.format('r.id')}) "  # noqa: S608
        "ORDER BY id LIMIT ?",
        (sample,),
    ).fetchall()
    unknown = conn.execute(
        "SELECT a.request_id FROM audit a WHERE a.action = 'submit' "
        "AND a.request_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM requests r WHERE r.id = a.request_id) "
        "ORDER BY a.seq LIMIT ?",
        (sample,),
    ).fetchall()
    count, first, last = conn.execute("SELECT count(*), min(seq), max(seq) FROM events").fetchone()
    orphans = conn.execute(
        f"SELECT seq FROM events e WHERE NOT EXISTS ({submitted.format('e.request_id')}) "  # noqa: S608
        "ORDER BY seq LIMIT ?",
        (sample,),
    ).fetchall()
    unannounced = conn.execute(
        "SELECT r.id FROM requests r LEFT JOIN (SELECT request_id, "
        "max(json_extract(data, '$.version')) AS version FROM events GROUP BY request_id) e "
        "ON e.request_id = r.id WHERE e.version IS NULL OR e.version < r.version "
        "ORDER BY r.id LIMIT ?",
        (sample,),
    ).fetchall()
    return LogCoverage(
        requests=requests,
        unaudited_requests=tuple(r[0] for r in unaudited),
        unknown_requests=tuple(r[0] for r in unknown),
        events=count,
        first_event_seq=first,
        last_event_seq=last,
        orphan_events=tuple(r[0] for r in orphans),
        unannounced_requests=tuple(r[0] for r in unannounced),
    )
