"""The PostgreSQL store: several signoff servers share one database.

Each :class:`~signoff.store.base.Write` is one transaction on a pooled connection.
Requests and tasks change by conditional update (``WHERE version = n - 1``), so two
servers deciding at once get one winner and one VersionConflict. Every write that changes
a request or appends to the audit chain or the event log locks the one ``log_head`` row
first, before any request row, and advances it: writers on every server queue there, so
audit and event seqs are gap-free and become visible in commit order, and the chain links
in that same order. The head first, rows after, in every transaction: no two writes wait
for each other, even a group (below) that changes several requests' rows under the head.
A write that appends events also runs ``pg_notify('signoff_events', <last seq>)`` in its
transaction, so listeners elsewhere wake exactly when it commits.

The lock on ``log_head`` is what every server's writers queue on, so it is held only
inside the database: the ``signoff_append`` function (migration 6) takes it, chains the
audit entries (sha256 in the database, over the same bytes
:func:`~signoff.domain.audit.entry_hash` hashes), numbers and stores the entries and
events, moves the head and notifies, with no round trip to a client in between. A write
that stores only its request (the life of a request: submit, decide, claim, report) is
one statement, its request row in a CTE and the append after it, run as its own implicit
transaction: one round trip, BEGIN and COMMIT included, and a VersionConflict or
DuplicateRequest leaves nothing behind because the append runs only on the CTE's row.
A new request decided against grants read at some grants version (Write's
``grants_version``) reads the version through the head's lock in the same statement, and
fails with GrantsChanged, storing nothing, if a grant was stored since (migration 8).

Such writes are committed in groups. A write that finds none of this store's in flight is
sent at once, by its caller; those that come while one is in flight wait, and are then
sent together, as one pipelined round trip that is one implicit transaction (asyncpg's
``fetchmany``, one statement per write, each numbered so its row comes back to it). The
group takes the ``log_head`` lock once and waits for one WAL flush and sends its NOTIFYs
together, where each write alone would take the lock, flush and wake every listener in
turn. A write that finds its request clashed or moved on stores nothing, as alone, and
the others commit. A database error rolls the whole group back; its writes are then sent
one by one, so that only the write at fault fails.

Since these writes go one send at a time, they keep one pooled connection between sends
(with a pool of two or more): taking it from the pool and giving it back for each write
cost the caller a task and a turn of the event loop (asyncpg shields the release), 5-7%
of a pause and resume (bench/RESULTS.md). The other writes and the reads use the rest of
the pool. A connection that fails, or a send that is cancelled on its way, goes back to the
pool (which closes or resets it), and the next send takes another.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

from signoff.domain.audit import GENESIS_HASH, AuditDraft, AuditEntry, LogCoverage, committed_entry
from signoff.domain.events import Event, committed_event
from signoff.domain.grants import Grant
from signoff.domain.jsoncanon import canonical_json
from signoff.domain.notify import LinkKind, Notice, PersonLink, Route
from signoff.domain.principals import TokenRecord
from signoff.domain.requests import ApprovalRequest, Request, stored_request
from signoff.domain.sessions import SessionRecord
from signoff.domain.tasks import Task, TaskStatus
from signoff.domain.webhooks import Delivery, DeliveryStatus, Webhook
from signoff.errors import GrantsChanged, SignoffError, StoreUnavailable
from signoff.store import tables
from signoff.store.base import (
    Committed,
    DuplicateRequest,
    GrantsRead,
    Page,
    RequestQuery,
    VersionConflict,
    Write,
    lapsed_among,
    to_micros,
)
from signoff.store.postgres_migrations import GRANTS_CHANGED, MIGRATIONS, SCHEMA_VERSION

try:
    import asyncpg
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "the PostgreSQL store needs asyncpg: pip install 'signoff[postgres]'"
    ) from exc

__all__ = ["EVENTS_CHANNEL", "PostgresStore"]

EVENTS_CHANNEL = "signoff_events"
"""The NOTIFY channel a commit that appends events signals on; the payload's first line is
its last seq, the events follow when they fit (see :mod:`signoff.bus.postgres`)."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# What a lost, refused or broken connection (or a database in trouble) raises.
_FAILURES = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # e.g. BEGIN on a connection the server has just dropped
)
# What a connection that is gone raises (a restart, a failover, pg_terminate_backend, a
# proxy's idle cut). Whatever it had not committed was rolled back with it, so the same work
# may run again, on a new connection: see PostgresStore._renew.
_LOST = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
)

_T = TypeVar("_T")


def _stale_grants(exc: BaseException) -> bool:
    """Whether the database refused a new request decided against an old grants version."""
    return isinstance(exc, asyncpg.PostgresError) and exc.sqlstate == GRANTS_CHANGED


def _where(dsn: str) -> str:
    """The database a DSN names, for messages: host, port and name, never the password."""
    try:
        parts = urlsplit(dsn)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "PostgreSQL"
    return f"PostgreSQL at {host}{port}{parts.path}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is gone (a timeout says the database is slow)."""
    return isinstance(exc, _LOST) and not isinstance(exc, TimeoutError)


async def _keep_session(conn: Any) -> None:
    """The pool's reset on release: nothing beyond asyncpg's own rollback of an open transaction.

    The default reset is one more round trip per use of a connection (``RESET ALL``,
    ``UNLISTEN *``, ``CLOSE ALL``, advisory unlocks), undoing what this store never does on a
    pooled connection: it sets no session setting, listens nowhere, opens no cursor and takes
    only transaction-scoped advisory locks.
    """


async def _release(pool: Any, conn: Any) -> None:
    # A failed release (the reset query on a connection that has just died) has already
    # terminated the connection; the work done on it stands as it is, committed or not.
    with contextlib.suppress(*_FAILURES):
        await pool.release(conn)


_RECENT_EVENTS = 2048
"""How many of the newest events a store keeps parsed, for its process's readers."""


class _RecentEvents:
    """The events this process committed or read lately, by seq.

    Every reader of the log in a server (the follower, each live stream's catch-up, the
    webhook and notification dispatchers) reads the same few newest events, and on several
    servers a reader goes back to the log whenever another server's commit reaches this
    bus after a later one of its own. A committed event never changes, so each is parsed
    once here and the others get the same (frozen) object, its row sent without its data.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._events: dict[int, Event] = {}
        self._newest = 0

    def add(self, events: Iterable[Event]) -> None:
        """Keep ``events``; past the size, forget the oldest quarter."""
        for event in events:
            self._events[event.seq] = event
            self._newest = max(self._newest, event.seq)
        if len(self._events) > self._size:
            for seq in sorted(self._events)[: len(self._events) - self._size * 3 // 4]:
                del self._events[seq]

    def get(self, seq: int) -> Event | None:
        """The event with this seq, if held."""
        return self._events.get(seq)

    def between(self, after_seq: int, last_seq: int) -> dict[int, Event]:
        """The events held with ``after_seq < seq <= last_seq``."""
        events = self._events
        last_seq = min(last_seq, self._newest)
        if last_seq - after_seq > len(events):
            return {seq: e for seq, e in events.items() if after_seq < seq <= last_seq}
        return {seq: events[seq] for seq in range(after_seq + 1, last_seq + 1) if seq in events}


class PostgresStore:
    """A :class:`~signoff.store.base.Store` in one PostgreSQL database (or one schema of it)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema must be a lower-case identifier, not {schema!r}")
        self.dsn = dsn
        """The connection string; a follower LISTENs on the same database."""
        self.schema = schema
        """The schema the tables live in (created if missing); None: the search_path's."""
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._where = _where(dsn)
        self._pool: Any = None
        self._recent = _RecentEvents(_RECENT_EVENTS)
        self._backends: set[int] = set()
        self._carry = True  # commits NOTIFY, with their events (for other processes' followers)
        self._heard: Callable[[int | None], None] | None = None  # told each commit's last seq
        self._sending = False  # a write of the one-statement kind is on its way
        self._sender: Any = None  # the pooled connection they are sent on, kept between sends
        self._idle: asyncio.Event | None = None  # set once none is (made in the pool's loop)
        self._queued: list[_Queued] = []  # those waiting for it, sent next as one group
        # the task sending them, held here: the event loop keeps only a weak reference
        self._flusher: asyncio.Task[None] | None = None
        self.groups = 0
        """How many groups of more than one write were sent (for tests and benchmarks)."""

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect a pool and migrate the schema to the current version."""
        if self._pool is not None:
            return
        settings = {"application_name": "signoff"}
        if self.schema is not None:
            settings["search_path"] = self.schema
        try:
            pool = await asyncpg.create_pool(
                self.dsn,
                min_size=self._min_size,
                max_size=self._max_size,
                timeout=self._connect_timeout,
                server_settings=settings,
                reset=_keep_session,
                init=self._joined,
            )
        except (*_FAILURES, ValueError) as exc:
            raise StoreUnavailable(f"cannot connect to {self._where}: {_one_line(exc)}") from None
        try:
            async with pool.acquire() as conn:
                await self._migrate(conn)
        except BaseException as exc:
            pool.terminate()
            if isinstance(exc, _FAILURES):
                raise StoreUnavailable(f"cannot migrate {self._where}: {_one_line(exc)}") from None
            raise
        self._pool = pool

    async def close(self) -> None:
        """Send the writes already waiting, wait for connections in use to be released,
        then close them all."""
        if self._sending and self._idle is not None:
            await self._idle.wait()
        self._idle = None
        await self._unpin()
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await pool.close()
            except _FAILURES:
                pool.terminate()

    async def _migrate(self, conn: Any) -> None:
        async with conn.transaction():
            # Servers starting together: one migrates, the others then find it done.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1))", f"signoff.migrate:{self.schema or ''}"
            )
            if self.schema is not None:
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            if await conn.fetchval("SELECT to_regclass('schema_version') IS NULL"):
                await conn.execute(
                    "CREATE TABLE schema_version "
                    "(id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
                )
            version = await conn.fetchval("SELECT version FROM schema_version WHERE id = 1") or 0
            if version > SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"{self._where} has schema version {version}, newer than this signoff "
                    f"understands ({SCHEMA_VERSION}); upgrade signoff"
                )
            for number in range(version + 1, SCHEMA_VERSION + 1):
                await conn.execute(MIGRATIONS[number - 1])
            if version < SCHEMA_VERSION:
                await conn.execute(
                    "INSERT INTO schema_version (id, version) VALUES (1, $1) "
                    "ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                    SCHEMA_VERSION,
                )

    def _open_pool(self) -> Any:
        if self._pool is None:
            raise StoreUnavailable("the store is not open")
        return self._pool

    async def _renew(self, pool: Any) -> None:
        """After a lost connection: the pool's other connections are replaced before reuse.

        Whatever cut one connection (a restart, a failover, pg_terminate_backend) has
        usually cut them all, and one the client has not yet seen close looks idle and
        healthy: handed out again, it fails too ("another operation is in progress").
        """
        await pool.expire_connections()

    async def _read(self, read: Callable[[Any], Awaitable[_T]]) -> _T:
        """Run ``read`` on the pool; once more, on a new connection, if its connection was lost."""
        for attempt in range(2):
            pool = self._open_pool()
            try:
                return await read(pool)
            except _FAILURES as exc:
                if attempt == 0 and _lost(exc):
                    await self._renew(pool)
                    continue  # a read is safe to repeat
                raise StoreUnavailable(f"cannot read {self._where}: {_one_line(exc)}") from None
        raise AssertionError("unreachable")

    async def _fetch(self, sql: str, *args: object) -> list[Any]:
        return list(await self._read(lambda pool: pool.fetch(sql, *args)))

    async def _fetchrow(self, sql: str, *args: object) -> Any:
        return await self._read(lambda pool: pool.fetchrow(sql, *args))

    async def _one(self, parse: Callable[[Any], _T], sql: str, *args: object) -> _T | None:
        """The record the first row's one column holds, or None."""
        row = await self._fetchrow(sql, *args)
        return parse(row[0]) if row else None

    async def _all(self, parse: Callable[[Any], _T], sql: str, *args: object) -> list[_T]:
        """The records the rows' one column holds."""
        return [parse(r[0]) for r in await self._fetch(sql, *args)]

    # -- the protocol --------------------------------------------------------------------

    async def commit(self, write: Write) -> Committed:
        """Apply ``write`` in one transaction (with others in a group: see the module).

        A connection lost before COMMIT was sent took the transaction with it, so the write
        is tried once more on another connection. One lost while COMMIT was on its way may
        or may not have committed: that fails as StoreUnavailable, never tried twice.
        """
        statement = _one_statement(write, self._carry)
        if statement is None:
            return await self._in_transaction(write)
        if self._sending:  # join the next group
            queued = _Queued(statement, asyncio.get_running_loop().create_future())
            self._queued.append(queued)
            committed = await queued.done
        else:
            self._sending = True
            self._idle = self._idle or asyncio.Event()
            self._idle.clear()
            try:
                (committed,) = await self._send([statement])
            finally:
                self._hand_over()
        if committed is None:
            raise await self._refusal(write)
        return committed

    def _hand_over(self) -> None:
        """A send ended: the writes that came meanwhile go next, from a task of their own
        (no caller's cancellation can cut their group short)."""
        if self._queued:
            self._flusher = asyncio.create_task(self._flush(), name="signoff-pg-group-commit")
        else:
            self._sending = False
            if self._idle is not None:
                self._idle.set()

    async def _flush(self) -> None:
        """Send the waiting writes in groups until none is left."""
        group: list[_Queued] = []
        try:
            while self._queued:
                group = self._next_group()
                if not group:
                    continue
                outcomes: list[Committed | BaseException | None]
                try:
                    outcomes = list(await self._send([q.statement for q in group]))
                except _GroupRefused:  # rolled back as a whole: each alone, to find the culprit
                    outcomes = [await self._alone(q.statement) for q in group]
                except Exception as exc:
                    outcomes = [exc] * len(group)
                for queued, outcome in zip(group, outcomes, strict=True):
                    if queued.done.done():
                        continue  # its caller was cancelled while it was on its way
                    if isinstance(outcome, BaseException):
                        queued.done.set_exception(_copied(outcome))
                    else:
                        queued.done.set_result(outcome)
                group = []
        finally:
            self._sending = False
            if self._idle is not None:
                self._idle.set()
            self._flusher = None
            for queued in (*group, *self._queued):  # only if this task was cancelled
                if not queued.done.done():
                    queued.done.set_exception(StoreUnavailable("the store closed"))
            self._queued = []

    def _next_group(self) -> list[_Queued]:
        """The oldest waiting write and up to :data:`_GROUP` - 1 more of the same
        statement (one ``fetchmany`` runs one statement), in order; the rest stay queued.
        A write whose caller was cancelled before its group left is dropped, never sent."""
        waiting = [q for q in self._queued if not q.done.done()]
        if not waiting:
            self._queued = []
            return []
        sql = waiting[0].statement.sql
        group = [q for q in waiting if q.statement.sql == sql][:_GROUP]
        self._queued = [q for q in waiting if q not in group]
        return group

    async def _alone(self, statement: _Statement) -> Committed | BaseException | None:
        """One write of a refused group, sent by itself: its outcome, or its error."""
        try:
            (committed,) = await self._send([statement])
        except Exception as exc:
            return exc
        return committed

    async def _send(self, group: Sequence[_Statement]) -> Sequence[Committed | None]:
        """Commit these writes of one statement as one transaction, in order: for each, what
        it committed, or None when its request clashed or moved on (it stored nothing)."""
        sql = group[0].sql

        async def run(conn: Any, commit: _Commit) -> list[Any]:
            # the statements are their own transaction: sending them is committing
            commit.sent = not conn.is_closed()
            if len(group) == 1:
                return list(await conn.fetch(sql, *group[0].values, 0))
            return list(await conn.fetchmany(sql, [(*s.values, n) for n, s in enumerate(group)]))

        rows = await self._writing(run, group=len(group) > 1, pinned=self._max_size > 1)
        if len(group) > 1:
            self.groups += 1
        appended = {row[0]: row[1] for row in rows}
        outcomes: list[Committed | None] = []
        for n, statement in enumerate(group):
            if n not in appended:
                outcomes.append(None)
                continue
            committed = statement.committed(appended[n])
            self._recent.add(committed.events)
            outcomes.append(committed)
        self._tell(outcomes)
        return outcomes

    async def _in_transaction(self, write: Write) -> Committed:
        """A write that takes more than one statement, in an explicit transaction."""

        # the head before any row (see _HEAD_FIRST): a request's statement, which _apply runs
        # first, takes it itself; a write of other rows that appends takes it at the start
        head_first = (
            write.insert is None and write.update is None and bool(write.audit or write.events)
        )

        async def run(conn: Any, commit: _Commit) -> Committed:
            async with conn.transaction():  # COMMIT is sent on leaving the block
                if head_first:
                    await conn.execute(_HEAD_FIRST)
                committed = await _apply(conn, write, self._carry)
                commit.sent = True
            return committed

        committed = await self._writing(run)
        self._recent.add(committed.events)
        self._tell((committed,))
        return committed

    def _tell(self, outcomes: Sequence[Committed | None]) -> None:
        """Tell :meth:`tell_commits`' listener the last seq these commits appended."""
        if self._heard is not None:
            last = max((o.events[-1].seq for o in outcomes if o and o.events), default=0)
            if last:
                self._heard(last)

    def _unsure(self) -> None:
        """Tell :meth:`tell_commits`' listener that a write whose COMMIT may have been
        made failed or was cancelled: what it appended, if anything, is in the log."""
        if self._heard is not None:
            self._heard(None)

    async def _writing(
        self,
        run: Callable[[Any, _Commit], Awaitable[_T]],
        *,
        group: bool = False,
        pinned: bool = False,
    ) -> _T:
        """``run`` a write on a pooled connection (``pinned``: the one the one-statement
        writes keep between sends, one send at a time). A connection lost before ``run``
        marked its COMMIT as sent took the transaction with it: it runs once more, on
        another. Any other failure is StoreUnavailable, or, when the database refused a
        ``group`` (rolled back whole), _GroupRefused."""
        for attempt in range(2):
            pool = self._open_pool()
            commit = _Commit()
            try:
                if pinned:
                    return await self._on_sender(pool, run, commit)
                conn = await pool.acquire()
                try:
                    return await run(conn, commit)
                finally:
                    await _release(pool, conn)
            except BaseException as exc:
                if commit.sent:  # it may have committed: the connection given back, it has or not
                    self._unsure()
                if isinstance(exc, SignoffError) or not isinstance(exc, _FAILURES):
                    raise
                if _stale_grants(exc):
                    if group:  # the others go again without it
                        raise _GroupRefused from exc
                    raise GrantsChanged() from None
                if attempt == 0 and not commit.sent and _lost(exc):
                    await self._renew(pool)
                    continue
                if group and isinstance(exc, asyncpg.PostgresError) and not _lost(exc):
                    raise _GroupRefused from exc
                raise StoreUnavailable(f"cannot write {self._where}: {_one_line(exc)}") from None
        raise AssertionError("unreachable")

    async def _on_sender(
        self, pool: Any, run: Callable[[Any, _Commit], Awaitable[_T]], commit: _Commit
    ) -> _T:
        """``run`` on the connection kept for sending, taken from ``pool`` if none is kept.
        Any failure or cancellation gives it back to the pool, which closes a broken one
        and waits out a cancelled query, so a kept connection is always an idle one."""
        if self._sender is None:
            self._sender = await pool.acquire()
        try:
            return await run(self._sender, commit)
        except BaseException:
            await self._unpin()
            raise

    async def _unpin(self) -> None:
        """Give the connection kept for sending back to its pool."""
        conn, self._sender = self._sender, None
        if conn is not None and self._pool is not None:
            await _release(self._pool, conn)

    async def _refusal(self, write: Write) -> SignoffError:
        """Why a one-statement write stored nothing: its request clashed or moved on."""
        if write.update is not None:
            return VersionConflict(write.update.id)
        request = write.insert
        assert request is not None

        async def read(pool: Any) -> tuple[str, str] | None:
            async with pool.acquire() as conn:
                return await _duplicate_row(
                    conn,
                    request.session_id,
                    request.tool_call_id if isinstance(request, ApprovalRequest) else None,
                    request.requested_by,
                    request.idempotency_key,
                )

        # ON CONFLICT waited for the clashing insert to commit, so a new snapshot sees it
        existing = await self._read(read)
        return DuplicateRequest(existing[0] if existing else request.id)

    def is_own_backend(self, pid: int) -> bool:
        """Whether ``pid`` is the server process of one of this store's connections.

        A NOTIFY names the backend that committed: its LISTEN follower reads nothing for a
        commit of this process, whose service publishes the events itself.
        """
        return pid in self._backends

    def others_follow(self, others: bool) -> None:
        """Whether another process's follower listens on this database (this process's
        follower counts them): only then do this store's commits NOTIFY, carrying their
        events when they fit, which spares those followers a read of the log. Until told,
        they do."""
        self._carry = others

    def tell_commits(self, heard: Callable[[int | None], None] | None) -> None:
        """Call ``heard(seq)`` with the last seq of each commit of this store that appended
        events, once it has committed, and ``heard(None)`` when a write that may have
        committed failed or was cancelled before its outcome was read (None: no longer).
        This process's follower learns of its commits so, not from a NOTIFY: it checks
        that their service published them, and reads the log for one it cannot know."""
        self._heard = heard

    async def _joined(self, conn: Any) -> None:
        """A new pooled connection: its backend's pid is one of this store's."""
        self._backends.add(conn.get_server_pid())

    async def get_request(self, request_id: str) -> Request | None:
        """The request, or None."""
        return await self._one(
            stored_request, "SELECT data FROM requests WHERE id = $1", request_id
        )

    async def find_duplicate(
        self,
        *,
        session_id: str,
        tool_call_id: str | None,
        requested_by: str,
        idempotency_key: str | None,
    ) -> Request | None:
        """The request the same call or idempotency key created, if any."""

        async def read(pool: Any) -> tuple[str, str] | None:
            async with pool.acquire() as conn:
                return await _duplicate_row(
                    conn, session_id, tool_call_id, requested_by, idempotency_key
                )

        row = await self._read(read)
        return stored_request(row[1]) if row else None

    async def list_requests(self, query: RequestQuery) -> Page:
        """Requests newest first, by keyset on (created_us, id)."""
        page = tables.request_page_sql(query, tables.numbered)
        rows = await self._fetch(page.sql, *page.params)
        return tables.request_page(rows, page.limit)

    async def due_requests(self, now: datetime, limit: int = 100) -> list[Request]:
        """Pending requests past their expiry, oldest expiry first."""
        return await self._all(
            stored_request,
            "SELECT data FROM requests WHERE status = 'pending' AND expires_us IS NOT NULL "
            "AND expires_us <= $1 ORDER BY expires_us LIMIT $2",
            to_micros(now),
            limit,
        )

    async def lapsed_claims(self, now: datetime, limit: int = 100) -> list[Request]:
        """Executing calls whose claim's lease ended, oldest lease first."""
        # the status index finds the few calls executing at once
        rows = await self._fetch("SELECT data FROM requests WHERE status = 'executing'")
        return lapsed_among((stored_request(r[0]) for r in rows), now, limit)

    async def get_grant(self, grant_id: str) -> Grant | None:
        """The grant, or None."""
        return await self._one(
            Grant.model_validate_json, "SELECT data FROM grants WHERE id = $1", grant_id
        )

    async def list_grants(
        self, *, tool_name: str | None = None, requested_by: str | None = None
    ) -> list[Grant]:
        """Grants, newest first."""
        return await self._all(
            Grant.model_validate_json,
            "SELECT data FROM grants WHERE ($1::text IS NULL OR tool_name = $1) "
            "AND ($2::text IS NULL OR requested_by = $2) ORDER BY created_us DESC, id DESC",
            tool_name,
            requested_by,
        )

    async def grants_for(self, tool_name: str, requested_by: str) -> GrantsRead:
        """This tool and requester's grants, newest first, and the grants version, in one
        snapshot (the head's row joined to them, so it comes back when there are none)."""
        rows = await self._fetch(
            "SELECT h.grants_version, g.data FROM log_head h LEFT JOIN grants g "
            "ON g.tool_name = $1 AND g.requested_by = $2 WHERE h.id = 1 "
            "ORDER BY g.created_us DESC, g.id DESC",
            tool_name,
            requested_by,
        )
        if not rows:
            raise StoreUnavailable(f"{self._where}: the log_head row is missing")
        grants = tuple(Grant.model_validate_json(row[1]) for row in rows if row[1] is not None)
        return GrantsRead(int(rows[0][0]), grants)

    async def find_token(self, token_hash: str) -> TokenRecord | None:
        """The token with this hash, or None."""
        return await self._one(
            TokenRecord.model_validate_json,
            "SELECT data FROM tokens WHERE token_hash = $1",
            token_hash,
        )

    async def get_token(self, token_id: str) -> TokenRecord | None:
        """The token with this id, or None."""
        return await self._one(
            TokenRecord.model_validate_json, "SELECT data FROM tokens WHERE id = $1", token_id
        )

    async def list_tokens(self) -> list[TokenRecord]:
        """All tokens, oldest first."""
        return await self._all(
            TokenRecord.model_validate_json, "SELECT data FROM tokens ORDER BY created_us, id"
        )

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The inbox session, or None."""
        return await self._one(
            SessionRecord.model_validate_json, "SELECT data FROM sessions WHERE id = $1", session_id
        )

    async def list_audit(
        self, *, request_id: str | None = None, after_seq: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        """Audit entries in chain order."""
        rows = await self._fetch(
            f"SELECT {tables.AUDIT.column_list} FROM audit WHERE seq > $1 "  # noqa: S608
            "AND ($2::text IS NULL OR request_id = $2) ORDER BY seq LIMIT $3",
            after_seq,
            request_id,
            limit,
        )
        return [tables.audit_entry(r) for r in rows]

    async def audit_head(self) -> tuple[int, str] | None:
        """The (seq, hash) kept beside the log; None while the chain is empty."""
        row = await self._fetchrow("SELECT audit_seq, audit_hash FROM log_head WHERE id = 1")
        if row is None or row[1] is None:
            return None
        return int(row[0]), str(row[1])

    async def audit_coverage(self, sample: int = 5) -> LogCoverage:
        """Counted in one statement, so the figures come from one snapshot."""
        row = await self._fetchrow(_COVERAGE, sample)
        return LogCoverage(
            requests=row[0],
            unaudited_requests=tuple(row[1]),
            unknown_requests=tuple(row[2]),
            events=row[3],
            first_event_seq=row[4],
            last_event_seq=row[5],
            event_head=row[6],
            orphan_events=tuple(row[7]),
            unannounced_requests=tuple(row[8]),
        )

    async def list_events(self, *, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        """Events after ``after_seq``, in order; those parsed here lately are not sent again."""
        held = self._recent.between(after_seq, after_seq + limit)
        rows = await self._fetch(
            "SELECT seq, type, at, CASE WHEN seq = ANY($3::bigint[]) THEN NULL ELSE data END "
            "FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
            after_seq,
            limit,
            list(held),
        )
        # another reader's rows may have come first and been parsed while these were on
        # their way: a server's readers all go to the log at once, on the same commit
        events = [
            held[r[0]] if r[3] is None else self._recent.get(r[0]) or tables.event_from_row(r)
            for r in rows
        ]
        self._recent.add(events)
        return events

    def carried_events(self, rows: Sequence[tuple[int, str, str, str]]) -> list[Event]:
        """The events these rows of ``seq, type, at, data`` hold, as :meth:`list_events`
        would give them: those parsed here lately are reused, the others kept for the
        server's other readers (a LISTEN follower's NOTIFYs carry other servers' rows)."""
        events = [self._recent.get(row[0]) or tables.event_from_row(row) for row in rows]
        self._recent.add(events)
        return events

    async def last_event_seq(self) -> int:
        """The newest committed event's seq (0 when none)."""
        row = await self._fetchrow("SELECT event_seq FROM log_head WHERE id = 1")
        return int(row[0]) if row else 0

    async def list_webhooks(self) -> list[Webhook]:
        """Webhook endpoints, oldest first."""
        return await self._all(
            Webhook.model_validate_json, "SELECT data FROM webhooks ORDER BY created_us, id"
        )

    async def get_delivery(self, delivery_id: str) -> Delivery | None:
        """One delivery, or None."""
        return await self._one(
            Delivery.model_validate_json, "SELECT data FROM deliveries WHERE id = $1", delivery_id
        )

    async def list_deliveries(
        self, *, status: DeliveryStatus | None = None, limit: int = 100
    ) -> list[Delivery]:
        """Deliveries, newest first."""
        return await self._all(
            Delivery.model_validate_json,
            "SELECT data FROM deliveries WHERE ($1::text IS NULL OR status = $1) "
            "ORDER BY created_us DESC, event_seq DESC, id DESC LIMIT $2",
            status,
            limit,
        )

    async def due_deliveries(self, now: datetime, limit: int = 100) -> list[Delivery]:
        """Pending deliveries whose next attempt is due, oldest first, in event order."""
        return await self._all(
            Delivery.model_validate_json,
            "SELECT data FROM deliveries WHERE status = 'pending' AND next_attempt_us <= $1 "
            "ORDER BY next_attempt_us, event_seq, id LIMIT $2",
            to_micros(now),
            limit,
        )

    async def list_routes(self) -> list[Route]:
        """Stored notification routes, oldest first."""
        return await self._all(
            Route.model_validate_json, "SELECT data FROM notify_routes ORDER BY created_us, id"
        )

    async def list_links(self) -> list[PersonLink]:
        """Person links, oldest first."""
        return await self._all(
            PersonLink.model_validate_json, "SELECT data FROM person_links ORDER BY created_us, id"
        )

    async def get_link(self, kind: LinkKind, external_id: str) -> PersonLink | None:
        """The link of this Slack user id or email address, or None."""
        return await self._one(
            PersonLink.model_validate_json,
            "SELECT data FROM person_links WHERE id = $1",
            tables.link_key(kind, external_id),
        )

    async def list_notices(
        self, *, route_id: str | None = None, request_id: str | None = None, limit: int = 100
    ) -> list[Notice]:
        """Notices, newest first, of one route and/or one request if given."""
        return await self._all(
            Notice.model_validate_json,
            "SELECT data FROM notices WHERE ($1::text IS NULL OR route_id = $1) "
            "AND ($2::text IS NULL OR request_id = $2) "
            "ORDER BY created_us DESC, id DESC LIMIT $3",
            route_id,
            request_id,
            limit,
        )

    async def due_notices(self, now: datetime, limit: int = 100) -> list[Notice]:
        """Pending notices whose next attempt is due, oldest due first."""
        return await self._all(
            Notice.model_validate_json,
            "SELECT data FROM notices WHERE status = 'pending' AND next_attempt_us <= $1 "
            "ORDER BY next_attempt_us, id LIMIT $2",
            to_micros(now),
            limit,
        )

    async def use_nonce(self, key: str, until: datetime, now: datetime) -> bool:
        """Record ``key`` as used until ``until``; False if it already was.

        Not retried on a lost connection: the insert may have committed, and a key is
        better refused once too often than used twice.
        """
        pool = self._open_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("DELETE FROM nonces WHERE until_us <= $1", to_micros(now))
                inserted = await conn.fetchval(
                    "INSERT INTO nonces (key, until_us) VALUES ($1, $2) "
                    "ON CONFLICT (key) DO NOTHING RETURNING key",
                    key,
                    to_micros(until),
                )
        except _FAILURES as exc:
            raise StoreUnavailable(f"cannot write {self._where}: {_one_line(exc)}") from None
        return inserted is not None

    async def get_task(self, task_id: str) -> Task | None:
        """The task, or None."""
        return await self._one(
            Task.model_validate_json, "SELECT data FROM tasks WHERE id = $1", task_id
        )

    async def find_task(self, request_id: str) -> Task | None:
        """The task that filed this request, or None."""
        return await self._one(
            Task.model_validate_json,
            "SELECT t.data FROM task_requests AS r JOIN tasks AS t ON t.id = r.task_id "
            "WHERE r.request_id = $1",
            request_id,
        )

    async def list_tasks(self, *, status: TaskStatus | None = None, limit: int = 100) -> list[Task]:
        """Tasks, newest first by (created_us, id)."""
        return await self._all(
            Task.model_validate_json,
            "SELECT data FROM tasks WHERE ($1::text IS NULL OR status = $1) "
            "ORDER BY created_us DESC, id DESC LIMIT $2",
            status,
            limit,
        )


async def _duplicate_row(
    conn: Any,
    session_id: str,
    tool_call_id: str | None,
    requested_by: str,
    idempotency_key: str | None,
) -> tuple[str, str] | None:
    for where, values in tables.duplicate_lookups(
        session_id, tool_call_id, requested_by, idempotency_key
    ):
        row = await conn.fetchrow(
            tables.select_sql("requests", "id, data", where, tables.numbered), *values
        )
        if row:
            return str(row[0]), str(row[1])
    return None


def _upsert_sql(table: tables.Table[Any]) -> str:
    """Insert a row, or replace every column of the one with its id."""
    replaced = ", ".join(f"{column} = excluded.{column}" for column in table.columns[1:])
    return f"{tables.insert_sql(table, tables.numbered)} ON CONFLICT (id) DO UPDATE SET {replaced}"


# Every write that changes a request or appends to the logs takes the log_head lock before
# any request row (a lock, or a wait on another transaction's key), and so before it can wait
# for one: the head first, rows after, in every transaction, so no two of them ever wait for
# each other (a group of writes, below, changes several rows while it holds the head). A
# request's insert and update take it in the id they are given: a sub-select locking the
# head, evaluated once before the row is looked for (an InitPlan).
_HEAD_FIRST = "SELECT 1 FROM log_head WHERE id = 1 FOR UPDATE"


_STALE = "signoff_grants_changed()"
"""Raises GRANTS_CHANGED (migration 8)."""


def _head_first(key: int, grants: int | None = None) -> tables.Marks:
    """``$n``, with the ``key``-th one read through the head's lock; with ``grants``, only
    while the grants version there is the ``grants``-th parameter (GRANTS_CHANGED raised
    otherwise). Read through the lock, the version is the last committed one, even when
    the lock was waited for: PostgreSQL evaluates the row again once it has it."""

    def marks(n: int) -> str:
        if n != key:
            return f"${n}"
        if grants is None:
            return f"(SELECT ${n}::text FROM log_head WHERE id = 1 FOR UPDATE)"  # noqa: S608
        value = f"CASE WHEN grants_version = ${grants}::bigint THEN ${n}::text ELSE {_STALE} END"
        return f"(SELECT {value} FROM log_head WHERE id = 1 FOR UPDATE)"  # noqa: S608

    return marks


# ON CONFLICT without a target covers the id and both idempotency indexes, and waits for a
# concurrent insert of the same keys to commit or roll back.
_INSERT_REQUEST = (
    f"{tables.insert_sql(tables.REQUESTS, _head_first(1))} ON CONFLICT DO NOTHING RETURNING id"
)
_INSERT_AT_GRANTS = (
    f"{tables.insert_sql(tables.REQUESTS, _head_first(1, len(tables.REQUESTS.columns) + 1))} "
    "ON CONFLICT DO NOTHING RETURNING id"
)
"""A new request decided against the grants at a grants version, its last parameter."""
_UPDATE_REQUEST = (
    f"{tables.update_sql(tables.REQUESTS, _head_first(len(tables.REQUESTS.columns)))} RETURNING id"
)
_INSERT_TASK = (
    f"{tables.insert_sql(tables.TASKS, tables.numbered)} ON CONFLICT (id) DO NOTHING RETURNING id"
)
_UPDATE_TASK = f"{tables.update_sql(tables.TASKS, tables.numbered)} RETURNING id"
_UPSERTS = {
    table.name: _upsert_sql(table)
    for table in (
        tables.GRANTS,
        tables.WEBHOOKS,
        tables.DELIVERIES,
        tables.TOKENS,
        tables.SESSIONS,
        tables.ROUTES,
        tables.NOTICES,
        tables.PERSON_LINKS,
    )
}


async def _upsert(conn: Any, table: tables.Table[_T], records: tuple[_T, ...]) -> None:
    """Insert ``records`` into ``table``, or replace those already there by id."""
    # In id order, so two writes replacing the same records cannot deadlock each other.
    if records:
        rows = sorted(table.rows(records), key=lambda row: str(row[0]))
        await conn.executemany(_UPSERTS[table.name], rows)


async def _insert_request(conn: Any, request: Request, json: tables.RequestJson) -> None:
    """Insert a new request; DuplicateRequest names the request it would repeat."""
    if await conn.fetchval(_INSERT_REQUEST, *json.row(request)) is not None:
        return
    existing = await _duplicate_row(
        conn,
        request.session_id,
        request.tool_call_id if isinstance(request, ApprovalRequest) else None,
        request.requested_by,
        request.idempotency_key,
    )
    raise DuplicateRequest(existing[0] if existing else request.id)


async def _update_request(conn: Any, request: Request, json: tables.RequestJson) -> None:
    """Store a request's next version, if the stored one is the version before it."""
    values = tables.update_values(json.row(request), request.version)
    if await conn.fetchval(_UPDATE_REQUEST, *values) is None:
        raise VersionConflict(request.id)


async def _store_task(conn: Any, task: Task) -> None:
    """Insert a version-1 task or conditionally update it, then index its pending requests."""
    row = tables.TASKS.values(task)
    if task.version == 1:
        stored = await conn.fetchval(_INSERT_TASK, *row)
    else:
        stored = await conn.fetchval(_UPDATE_TASK, *tables.update_values(row, task.version))
    if stored is None:
        raise VersionConflict(task.id)
    request_ids = list(dict.fromkeys(task.request_ids))
    if request_ids:
        await conn.execute(
            "INSERT INTO task_requests (request_id, task_id) SELECT unnest($1::text[]), $2 "
            "ON CONFLICT (request_id) DO UPDATE SET task_id = excluded.task_id",
            request_ids,
            task.id,
        )


_COVERAGE = """
SELECT
    (SELECT count(*) FROM requests),
    ARRAY(SELECT r.id FROM requests r WHERE NOT EXISTS (
        SELECT 1 FROM audit a WHERE a.request_id = r.id AND a.action = 'submit'
    ) ORDER BY r.id LIMIT $1),
    ARRAY(SELECT a.request_id FROM audit a WHERE a.action = 'submit'
        AND a.request_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM requests r WHERE r.id = a.request_id)
        ORDER BY a.seq LIMIT $1),
    (SELECT count(*) FROM events),
    (SELECT min(seq) FROM events),
    (SELECT max(seq) FROM events),
    (SELECT event_seq FROM log_head WHERE id = 1),
    ARRAY(SELECT e.seq FROM events e WHERE NOT EXISTS (
        SELECT 1 FROM audit a WHERE a.request_id = e.request_id AND a.action = 'submit'
    ) ORDER BY e.seq LIMIT $1),
    ARRAY(SELECT r.id FROM requests r LEFT JOIN (
        SELECT request_id,
            -- jsonb refuses the escape \\u0000 (an agent's NUL in its args): it is read as
            -- \\u2400, still valid JSON whether its backslash opens an escape or is one
            max((replace(data, E'\\\\u0000', E'\\\\u2400')::jsonb ->> 'version')::bigint) AS version
        FROM events GROUP BY request_id
    ) e ON e.request_id = r.id WHERE e.version IS NULL OR e.version < r.version
    ORDER BY r.id LIMIT $1)
"""
"""What :meth:`PostgresStore.audit_coverage` counts, in one snapshot."""

_APPEND_PARAMETERS = ("text", "text", *("text[]",) * 11, "text", "boolean")
"""The types of ``signoff_append``'s parameters (migration 9), in order."""


def _append_call(first: int) -> str:
    """``signoff_append(...)`` called with parameters numbered from ``first``."""
    marks = ", ".join(f"${first + n}::{kind}" for n, kind in enumerate(_APPEND_PARAMETERS))
    return f"signoff_append({marks})"


def _hash_parts(draft: AuditDraft, stamp: str, details_json: str) -> tuple[str, str]:
    """What :func:`~signoff.domain.audit.entry_hash` hashes after the previous hash and a
    newline, split around the entry's seq: the canonical header up to ``"seq":`` and the
    rest (the keys sorting after ``seq``, a newline, the canonical details)."""
    before = canonical_json(
        {
            "action": draft.action,
            "actor": draft.actor,
            "at": stamp,
            "from_status": draft.from_status,
            "request_id": draft.request_id,
        }
    )
    head = before[:-1] + ',"seq":'
    tail = ',"to_status":' + canonical_json(draft.to_status) + "}\n" + details_json
    return head, tail


def _append_values(write: Write, json: tables.RequestJson, carry: bool) -> tuple[object, ...]:
    """``signoff_append``'s arguments for the write's audit entries and events (``carry``:
    whether its commit NOTIFYs, carrying them when they fit)."""
    stamp = write.at.isoformat()
    details = [canonical_json(draft.details) for draft in write.audit]
    parts = [_hash_parts(d, stamp, text) for d, text in zip(write.audit, details, strict=True)]
    return (
        stamp,
        GENESIS_HASH,
        [draft.request_id for draft in write.audit],
        [draft.action for draft in write.audit],
        [draft.actor for draft in write.audit],
        [draft.from_status for draft in write.audit],
        [draft.to_status for draft in write.audit],
        details,
        [head for head, _ in parts],
        [tail for _, tail in parts],
        [draft.type for draft in write.events],
        [draft.request.id for draft in write.events],
        [json(draft.request) for draft in write.events],
        EVENTS_CHANNEL,
        carry,
    )


def _committed(write: Write, appended: Any) -> Committed:
    """The write's entries and events as ``signoff_append`` numbered and chained them."""
    first_seq, prev, first_event, hashes = appended
    entries: list[AuditEntry] = []
    for n, (draft, digest) in enumerate(zip(write.audit, hashes, strict=True)):
        entries.append(
            committed_entry(draft, seq=first_seq + n, at=write.at, prev_hash=prev, hash=digest)
        )
        prev = digest
    events = tuple(
        committed_event(draft, seq=first_event + n, at=write.at)
        for n, draft in enumerate(write.events)
    )
    return Committed(events=events, audit=tuple(entries))


async def _append_logs(conn: Any, write: Write, json: tables.RequestJson, carry: bool) -> Committed:
    """Append the write's audit entries and events, last in its transaction."""
    values = _append_values(write, json, carry)
    appended = await conn.fetchval(f"SELECT {_append_call(1)}", *values)
    return _committed(write, appended)


def _statement_sql(request: str | None, parameters: int, logs: bool) -> str:
    """One write as one statement: the request's insert or update (if any) in a CTE, then
    the append, which runs only if the CTE returned its row. The row it returns starts
    with the last parameter, the write's place in its group."""
    place = f"${parameters + (len(_APPEND_PARAMETERS) if logs else 0) + 1}::int"
    append = _append_call(parameters + 1) if logs else "NULL"
    if request is None:
        return f"SELECT {place}, {append}"
    return f"WITH stored AS ({request}) SELECT {place}, {append} FROM stored"  # noqa: S608


_REQUEST_PARAMETERS = len(tables.REQUESTS.columns)
_STATEMENTS = {
    (kind, logs): _statement_sql(sql, parameters, logs)
    for kind, sql, parameters in (
        ("insert", _INSERT_REQUEST, _REQUEST_PARAMETERS),
        ("at_grants", _INSERT_AT_GRANTS, _REQUEST_PARAMETERS + 1),
        ("update", _UPDATE_REQUEST, _REQUEST_PARAMETERS + 1),
        ("none", None, 0),
    )
    for logs in (True, False)
}
"""The one-statement writes, by what they do to a request and whether they append."""


@dataclass(frozen=True)
class _Statement:
    """A write that is one statement, and so its own implicit transaction (or one of a
    group's); its values lack the last parameter, its place in the group."""

    write: Write
    sql: str
    values: tuple[object, ...]
    logs: bool

    def committed(self, appended: Any) -> Committed:
        """What it committed, from the append's result in its row."""
        return _committed(self.write, appended) if self.logs else Committed()


@dataclass(frozen=True, eq=False)
class _Queued:
    """A write waiting for the one on its way, and where its outcome goes."""

    statement: _Statement
    done: asyncio.Future[Committed | None]


@dataclass
class _Commit:
    """Whether a write's COMMIT may be on its way: a lost connection is then not retried."""

    sent: bool = False


class _GroupRefused(Exception):
    """The database refused a group (it rolled back whole): its writes go one by one."""


_GROUP = 100
"""Writes one group carries at most."""


def _copied(exc: BaseException) -> BaseException:
    """An error for one more waiting write: a StoreUnavailable of its own (each caller's
    traceback is its own), or the same error."""
    return StoreUnavailable(exc.message) if isinstance(exc, StoreUnavailable) else exc


_REST = tuple(
    (f.name, f.default)
    for f in fields(Write)
    if f.name not in ("at", "insert", "update", "audit", "events", "grants_version")
)
"""The fields of a write, with their defaults, that one statement does not store."""


def _one_statement(write: Write, carry: bool) -> _Statement | None:
    """The write as one statement, if it changes at most one request besides the logs
    (``carry``: whether its commit NOTIFYs, carrying its events when they fit)."""
    # whatever else a write may carry (now or in a later version of Write) needs the
    # transaction: every other field must be at its default
    if any(getattr(write, name) != empty for name, empty in _REST) or (
        write.insert is not None and write.update is not None
    ):
        return None
    if write.grants_version is not None and write.insert is None:
        return None
    logs = bool(write.audit or write.events)
    json = tables.RequestJson()
    values: tuple[object, ...] = ()
    if write.insert is not None and write.grants_version is not None:
        kind = "at_grants"
        values = (*json.row(write.insert), write.grants_version)
    elif write.insert is not None:
        kind = "insert"
        values = json.row(write.insert)
    elif write.update is not None:
        kind = "update"
        values = tables.update_values(json.row(write.update), write.update.version)
    elif logs:
        kind = "none"
    else:
        return None
    if logs:
        values = (*values, *_append_values(write, json, carry))
    return _Statement(write=write, sql=_STATEMENTS[kind, logs], values=values, logs=logs)


async def _apply(conn: Any, write: Write, carry: bool) -> Committed:
    """Run one write inside its transaction (``carry``: whether its commit NOTIFYs,
    carrying its events when they fit)."""
    json = tables.RequestJson()
    if write.grants_version is not None:  # the head first: this takes it
        version = await conn.fetchval("SELECT grants_version FROM log_head WHERE id = 1 FOR UPDATE")
        if version != write.grants_version:
            raise GrantsChanged()
    if write.insert is not None:
        await _insert_request(conn, write.insert, json)
    if write.update is not None:
        await _update_request(conn, write.update, json)
    if write.grants:  # the head's lock, taken above or now, before any other row's
        await conn.execute("UPDATE log_head SET grants_version = grants_version + 1 WHERE id = 1")
    if write.task is not None:
        await _store_task(conn, write.task)
    await _upsert(conn, tables.GRANTS, write.grants)
    await _upsert(conn, tables.WEBHOOKS, write.webhooks)
    await _upsert(conn, tables.DELIVERIES, write.deliveries)
    await _upsert(conn, tables.TOKENS, write.tokens)
    await _upsert(conn, tables.SESSIONS, write.sessions)
    await _upsert(conn, tables.ROUTES, write.routes)
    await _upsert(conn, tables.NOTICES, write.notices)
    await _upsert(conn, tables.PERSON_LINKS, write.links)
    if write.removed_routes:
        await conn.execute(
            "DELETE FROM notify_routes WHERE id = ANY($1::text[])", list(write.removed_routes)
        )
    if write.removed_links:
        await conn.execute(
            "DELETE FROM person_links WHERE id = ANY($1::text[])",
            [tables.link_key(*key) for key in write.removed_links],
        )
    if not write.audit and not write.events:
        return Committed()
    return await _append_logs(conn, write, json, carry)
