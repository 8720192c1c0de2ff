"""What the SQLite writer thread does with one write, and what is made before and after.

A write's rows, JSON and canonical audit details are made by :func:`prepare` on the caller's
event loop; :func:`apply_write` runs its statements inside the writer's transaction
(:class:`Txn`, which keeps the audit chain's head for the whole transaction) and returns
what it appended (:class:`Applied`). Statements set only what a write moves: what a step
costs is mostly the pages its transaction writes to the WAL and syncs.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from signoff.domain.audit import GENESIS_HASH
from signoff.domain.events import EventDraft
from signoff.domain.jsoncanon import canonical_json
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.tasks import Task
from signoff.store import tables
from signoff.store.base import DuplicateRequest, VersionConflict, Write, to_micros

__all__ = ["Applied", "Prepared", "Txn", "apply_write", "duplicate_row", "prepare"]

T = TypeVar("T")


class Txn:
    """The writer's open transaction: its connection and the audit chain's head.

    The head is read once per transaction and written back once, before the commit,
    instead of read and rewritten by every write of the batch.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._head: tuple[int, str] | None = None
        self._moved = False

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

    def save(self) -> tuple[tuple[int, str] | None, bool]:
        """What :meth:`restore` puts back when a write is rolled back."""
        return self._head, self._moved

    def restore(self, saved: tuple[tuple[int, str] | None, bool]) -> None:
        """Forget what a rolled-back write did to the head."""
        self._head, self._moved = saved

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


def _replace(conn: sqlite3.Connection, table: tables.Table[T], records: tuple[T, ...]) -> None:
    """Insert ``records`` into ``table``, or replace those already there by id."""
    if records:
        conn.executemany(
            tables.insert_sql(table, tables.qmarks, verb="INSERT OR REPLACE"), table.rows(records)
        )


@dataclass(frozen=True)
class Prepared:
    """A write's rows as far as they can be made before its transaction."""

    json: tables.RequestJson
    """Each request's JSON, made once for its row and its events."""
    insert: tuple[object, ...] | None
    """The inserted request's row."""
    update: tuple[object, ...] | None
    """The values of :data:`_UPDATE_REQUEST` for the updated request."""
    decider: str | None
    """Who decided the updated request, for :data:`_SET_DECIDER`."""
    details: list[str]
    """Each audit draft's canonical details JSON (the hash covers it)."""


@dataclass(frozen=True)
class Applied:
    """What a write appended inside its transaction, and what the store remembers of it."""

    audit: list[tables.AuditRow]
    """The audit rows, numbered and chained."""
    seqs: list[int]
    """Its events' seqs, in order."""
    events: tuple[EventDraft, ...]
    """Its events' drafts."""
    at: datetime
    """When it happened."""
    requests: list[tuple[str, Request]]
    """The requests it wrote, with their stored JSON."""


def prepare(write: Write) -> Prepared:
    """What of ``write`` needs neither the transaction nor the chain's head."""
    json = tables.RequestJson()
    update, decider = None, None
    if (request := write.update) is not None:
        update = (
            request.status,
            request.version,
            to_micros(request.expires_at) if request.expires_at else None,
            json(request),
            request.id,
            request.version - 1,
        )
        decider = request.decision.decided_by if request.decision else None
    for draft in write.events:
        json(draft.request)
    return Prepared(
        json=json,
        insert=json.row(write.insert) if write.insert is not None else None,
        update=update,
        decider=decider,
        details=[canonical_json(draft.details) for draft in write.audit],
    )


def _insert_request(conn: sqlite3.Connection, request: Request, row: tuple[object, ...]) -> None:
    """Insert a new request; DuplicateRequest names the request it would repeat."""
    tool_call_id = request.tool_call_id if isinstance(request, ApprovalRequest) else None
    existing = duplicate_row(
        conn, request.session_id, tool_call_id, request.requested_by, request.idempotency_key
    )
    if existing is not None:
        raise DuplicateRequest(existing[0])
    try:
        conn.execute(_INSERT_REQUEST, row)
    except sqlite3.IntegrityError:
        raise DuplicateRequest(request.id) from None
    _index_text(conn, request.id, row[_AT["search"]])


def _index_text(conn: sqlite3.Connection, request_id: str, text: object) -> None:
    """Add a new request's text to the search index, numbered after every request before it
    (a request's text never changes, so it is indexed once)."""
    seq = conn.execute("INSERT INTO request_search (id) VALUES (?)", (request_id,)).lastrowid
    conn.execute("INSERT INTO requests_fts (rowid, search) VALUES (?, ?)", (seq, text))


def _update_request(conn: sqlite3.Connection, request: Request, prepared: Prepared) -> None:
    """Store a request's next version, if the stored one is the version before it."""
    assert prepared.update is not None
    if conn.execute(_UPDATE_REQUEST, prepared.update).rowcount != 1:
        raise VersionConflict(request.id)
    conn.execute(_SET_DECIDER, (prepared.decider, request.id, prepared.decider))


def _store_task(conn: sqlite3.Connection, task: Task) -> None:
    """Insert a version-1 task or conditionally update it, then index its pending requests."""
    row = tables.TASKS.values(task)
    if task.version == 1:
        try:
            conn.execute(_INSERT_TASK, row)
        except sqlite3.IntegrityError:
            raise VersionConflict(task.id) from None
    elif conn.execute(_UPDATE_TASK, tables.update_values(row, task.version)).rowcount != 1:
        raise VersionConflict(task.id)
    conn.executemany(
        "INSERT OR REPLACE INTO task_requests (request_id, task_id) VALUES (?, ?)",
        [(request_id, task.id) for request_id in task.request_ids],
    )


def _append_audit(txn: Txn, write: Write, details: list[str]) -> list[tables.AuditRow]:
    """Chain the write's audit entries after the transaction's head, and move the head."""
    if not write.audit:
        return []
    seq, prev = txn.head
    rows = tables.chain_rows(write.audit, details, write.at, seq, prev)
    txn.conn.executemany(_INSERT_AUDIT, rows)
    txn.move_head(rows[-1][0], rows[-1][9])
    return rows


def _append_events(conn: sqlite3.Connection, write: Write, json: tables.RequestJson) -> list[int]:
    """Append the write's events; SQLite numbers them."""
    seqs: list[int] = []
    at = write.at.isoformat()
    for draft in write.events:
        request = draft.request
        seq = conn.execute(_INSERT_EVENT, (draft.type, at, request.id, json(request))).lastrowid
        assert seq is not None
        seqs.append(seq)
    return seqs


def apply_write(txn: Txn, write: Write, prepared: Prepared) -> Applied:
    """Run one write inside the batch's transaction (and its own savepoint)."""
    conn = txn.conn
    if write.insert is not None:
        assert prepared.insert is not None
        _insert_request(conn, write.insert, prepared.insert)
    if write.update is not None:
        _update_request(conn, write.update, prepared)
    if write.task is not None:
        _store_task(conn, write.task)
    _replace(conn, tables.GRANTS, write.grants)
    _replace(conn, tables.WEBHOOKS, write.webhooks)
    _replace(conn, tables.DELIVERIES, write.deliveries)
    _replace(conn, tables.TOKENS, write.tokens)
    _replace(conn, tables.SESSIONS, write.sessions)
    _replace(conn, tables.ROUTES, write.routes)
    _replace(conn, tables.NOTICES, write.notices)
    _replace(conn, tables.PERSON_LINKS, write.links)
    if write.removed_routes:
        conn.executemany(
            "DELETE FROM notify_routes WHERE id = ?", [(i,) for i in write.removed_routes]
        )
    if write.removed_links:
        conn.executemany(
            "DELETE FROM person_links WHERE id = ?",
            [(tables.link_key(*key),) for key in write.removed_links],
        )
    return Applied(
        audit=_append_audit(txn, write, prepared.details),
        seqs=_append_events(conn, write, prepared.json),
        events=write.events,
        at=write.at,
        requests=[(prepared.json(r), r) for r in (write.insert, write.update) if r is not None],
    )
