"""The tables both SQL stores keep, and how records become their rows and back.

The SQLite and PostgreSQL stores keep the same tables (see their migrations); they differ
in how they talk to the database (parameter marks, upsert syntax, how events are numbered),
not in what a row holds. So the columns of each table, the values a record puts in them,
the SQL that only needs the store's parameter marks, the audit chain's hashing and the
records read back from rows live here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeAlias, TypeVar

from pydantic import TypeAdapter

from signoff.domain.audit import AuditDraft, AuditEntry, committed_entry, fields_hash
from signoff.domain.events import Event
from signoff.domain.grants import Grant
from signoff.domain.jsoncanon import canonical_json
from signoff.domain.notify import Notice, PersonLink, Route
from signoff.domain.principals import TokenRecord
from signoff.domain.requests import ApprovalRequest, Request, stored_request
from signoff.domain.sessions import SessionRecord
from signoff.domain.tasks import Task
from signoff.domain.webhooks import Delivery, Webhook
from signoff.store import search
from signoff.store.base import (
    MAX_PAGE,
    Page,
    RequestQuery,
    decode_cursor,
    encode_cursor,
    to_micros,
)

__all__ = [
    "AUDIT",
    "DELIVERIES",
    "GRANTS",
    "NOTICES",
    "PERSON_LINKS",
    "REQUESTS",
    "ROUTES",
    "SESSIONS",
    "TASKS",
    "TOKENS",
    "WEBHOOKS",
    "AuditChain",
    "AuditFields",
    "AuditRow",
    "Marks",
    "PageSQL",
    "RequestJson",
    "Table",
    "audit_entry",
    "audit_fields",
    "chain_audit",
    "chain_rows",
    "duplicate_lookups",
    "event_from_row",
    "insert_sql",
    "link_key",
    "numbered",
    "qmarks",
    "request_page",
    "request_page_sql",
    "select_sql",
    "update_sql",
    "update_values",
]

R = TypeVar("R")

Marks = Callable[[int], str]
"""The store's placeholder for its ``n``-th parameter (numbered from 1)."""


def qmarks(n: int) -> str:
    """SQLite's placeholder: ``?`` whatever its position."""
    return "?"


def numbered(n: int) -> str:
    """PostgreSQL's placeholder: ``$n``."""
    return f"${n}"


@dataclass(frozen=True)
class Table(Generic[R]):
    """A table whose rows hold one kind of record, keyed by its first column (``id``)."""

    name: str
    columns: tuple[str, ...]
    values: Callable[[R], tuple[object, ...]]
    """The record's values, one per column, in ``columns`` order."""

    @property
    def column_list(self) -> str:
        """The columns, comma-separated, for a statement."""
        return ", ".join(self.columns)

    def rows(self, records: Iterable[R]) -> list[tuple[object, ...]]:
        """Each record's values."""
        return [self.values(record) for record in records]


def _request_values(request: Request) -> tuple[object, ...]:
    # The row without its data: see RequestJson.row, which adds the data serialized once.
    call = request if isinstance(request, ApprovalRequest) else None
    return (
        request.id,
        request.kind,
        request.status,
        request.session_id,
        call.tool_name if call else None,
        call.tool_call_id if call else None,
        request.requested_by,
        request.idempotency_key,
        to_micros(request.created_at),
        to_micros(request.expires_at) if request.expires_at else None,
        request.version,
        request.decision.decided_by if request.decision else None,
        search.search_text(request).lower(),
    )


REQUESTS: Table[Request] = Table(
    "requests",
    (
        "id",
        "kind",
        "status",
        "session_id",
        "tool_name",
        "tool_call_id",
        "requested_by",
        "idempotency_key",
        "created_us",
        "expires_us",
        "version",
        "decided_by",
        "search",
        "data",
    ),
    lambda r: RequestJson().row(r),
)
"""Its rows are best made by one write's :class:`RequestJson`, which serializes once."""
TASKS: Table[Task] = Table(
    "tasks",
    ("id", "status", "version", "created_us", "data"),
    lambda t: (t.id, t.status, t.version, to_micros(t.created_at), t.model_dump_json()),
)
GRANTS: Table[Grant] = Table(
    "grants",
    ("id", "tool_name", "requested_by", "created_us", "data"),
    lambda g: (g.id, g.tool_name, g.requested_by, to_micros(g.created_at), g.model_dump_json()),
)
WEBHOOKS: Table[Webhook] = Table(
    "webhooks",
    ("id", "created_us", "data"),
    lambda w: (w.id, to_micros(w.created_at), w.model_dump_json()),
)
DELIVERIES: Table[Delivery] = Table(
    "deliveries",
    ("id", "status", "next_attempt_us", "created_us", "event_seq", "data"),
    lambda d: (
        d.id,
        d.status,
        to_micros(d.next_attempt_at),
        to_micros(d.created_at),
        d.event_seq,
        d.model_dump_json(),
    ),
)
TOKENS: Table[TokenRecord] = Table(
    "tokens",
    ("id", "token_hash", "created_us", "data"),
    lambda t: (t.id, t.token_hash, to_micros(t.created_at), t.model_dump_json()),
)
SESSIONS: Table[SessionRecord] = Table(
    "sessions",
    ("id", "token_id", "expires_us", "data"),
    lambda s: (s.id, s.token_id, to_micros(s.expires_at), s.model_dump_json()),
)

ROUTES: Table[Route] = Table(
    "notify_routes",
    ("id", "name", "created_us", "data"),
    lambda r: (r.id, r.name, to_micros(r.created_at), r.model_dump_json()),
)
NOTICES: Table[Notice] = Table(
    "notices",
    ("id", "route_id", "request_id", "purpose", "status", "next_attempt_us", "created_us", "data"),
    lambda n: (
        n.id,
        n.route_id,
        n.request_id,
        n.purpose,
        n.status,
        to_micros(n.next_attempt_at),
        to_micros(n.created_at),
        n.model_dump_json(),
    ),
)


def link_key(kind: str, external_id: str) -> str:
    """A person link's row id: its kind and external id (one person per Slack user or
    address)."""
    return f"{kind}:{external_id}"


PERSON_LINKS: Table[PersonLink] = Table(
    "person_links",
    ("id", "name", "created_us", "data"),
    lambda p: (
        link_key(p.kind, p.external_id),
        p.name,
        to_micros(p.created_at),
        p.model_dump_json(),
    ),
)


class RequestJson:
    """Serializes each request of one write once: its row and its events carry the same."""

    def __init__(self) -> None:
        self._dumped: dict[int, str] = {}

    def __call__(self, request: Request) -> str:
        """The request's JSON (what ``RequestAdapter`` makes of it, through its own kind's
        serializer: the union's adapter picks that kind again on every call, at two to
        three times the cost)."""
        key = id(request)
        if key not in self._dumped:
            self._dumped[key] = request.model_dump_json()
        return self._dumped[key]

    def row(self, request: Request) -> tuple[object, ...]:
        """The request's values for :data:`REQUESTS`'s columns."""
        return (*_request_values(request), self(request))


def insert_sql(table: Table[Any], marks: Marks, *, verb: str = "INSERT") -> str:
    """``INSERT INTO table (columns) VALUES (marks)``; ``verb`` may be SQLite's
    ``INSERT OR REPLACE``."""
    places = ", ".join(marks(n) for n in range(1, len(table.columns) + 1))
    return f"{verb} INTO {table.name} ({table.column_list}) VALUES ({places})"


def update_sql(table: Table[Any], marks: Marks) -> str:
    """The conditional update of a versioned record: every column but ``id`` is set from
    the row's values (after its id), ``WHERE id = <id> AND version = <version - 1>``.

    Its parameters: :func:`update_values`.
    """
    columns = table.columns[1:]
    sets = ", ".join(f"{column} = {marks(n)}" for n, column in enumerate(columns, 1))
    key = f"id = {marks(len(columns) + 1)} AND version = {marks(len(columns) + 2)}"
    return f"UPDATE {table.name} SET {sets} WHERE {key}"  # noqa: S608 - fixed names


def update_values(row: tuple[object, ...], version: int) -> tuple[object, ...]:
    """The parameters of :func:`update_sql` that store ``row`` as ``version``: the row's
    values after its id, then its id and the version it replaces."""
    return (*row[1:], row[0], version - 1)


def select_sql(table: str, columns: str, where: Sequence[str], marks: Marks) -> str:
    """``SELECT columns FROM table WHERE a = <mark> AND b = <mark> ...``."""
    matches = " AND ".join(f"{column} = {marks(n)}" for n, column in enumerate(where, 1))
    return f"SELECT {columns} FROM {table} WHERE {matches}"  # noqa: S608 - fixed names


def duplicate_lookups(
    session_id: str,
    tool_call_id: str | None,
    requested_by: str,
    idempotency_key: str | None,
) -> list[tuple[tuple[str, ...], tuple[object, ...]]]:
    """Where a duplicate of a request may be, in the order to look: the columns to match
    and their values. The same call (session and tool_call_id) first, then the same
    idempotency key; both only among ``requested_by``'s own requests."""
    lookups: list[tuple[tuple[str, ...], tuple[object, ...]]] = []
    if tool_call_id is not None:
        lookups.append(
            (
                ("session_id", "tool_call_id", "requested_by"),
                (session_id, tool_call_id, requested_by),
            )
        )
    if idempotency_key is not None:
        lookups.append((("requested_by", "idempotency_key"), (requested_by, idempotency_key)))
    return lookups


@dataclass(frozen=True)
class PageSQL:
    """The statement for one page of requests, its parameters and the page's size."""

    sql: str
    params: list[object]
    limit: int
    """The page's size: the statement asks for one row more, to tell if another follows."""


def request_page_sql(query: RequestQuery, marks: Marks, *, fts: bool = False) -> PageSQL:
    """Requests matching ``query``, newest first, by keyset on (created_us, id).

    A search's words of three characters or more are looked up in SQLite's trigram index
    (``fts``), whose order is the order requests were stored in, or matched with LIKE,
    which PostgreSQL's trigram index serves; shorter words are looked for in each row's
    text. Either way every word is a parameter, never SQL or FTS syntax.
    """
    limit = max(1, min(query.limit, MAX_PAGE))
    sql = _PageWhere(marks)
    for column, value in (
        ("status", None if query.status == search.ENDED else query.status),
        ("session_id", query.session_id),
        ("kind", query.kind),
        ("requested_by", query.requested_by),
        ("decided_by", query.decided_by),
        ("tool_name", query.tool_name),
    ):
        if value is not None:
            sql.add(f"r.{column} = {{}}", value)
    if query.status == search.ENDED:
        sql.where.append("r.status <> 'pending'")  # as requests_ended's WHERE, to use it
    match = _text_filter(sql, query.text, fts=fts)
    source, order = "requests r", "r.created_us DESC, r.id DESC"
    if match is not None:
        source = (
            "requests_fts f JOIN request_search s ON s.seq = f.rowid JOIN requests r ON r.id = s.id"
        )
        order = "f.rowid DESC"
        sql.where.insert(0, f"requests_fts MATCH {marks(1)}")
        sql.params.insert(0, match)
    if query.cursor:
        created_us, request_id = decode_cursor(query.cursor)
        if match is not None:
            sql.add("f.rowid < (SELECT seq FROM request_search WHERE id = {})", request_id)
        else:
            sql.add("(r.created_us, r.id) < ({}, {})", created_us, request_id)
    sql.params.append(limit + 1)
    text = (
        f"SELECT r.created_us, r.id, r.data FROM {source}"  # noqa: S608 - fixed clauses
        + (" WHERE " + " AND ".join(sql.where) if sql.where else "")
        + f" ORDER BY {order} LIMIT {marks(len(sql.params))}"
    )
    return PageSQL(sql=text, params=sql.params, limit=limit)


@dataclass
class _PageWhere:
    """A page statement's conditions and their parameters, numbered as they are added."""

    marks: Marks
    where: list[str] = field(default_factory=list)
    params: list[object] = field(default_factory=list)

    def add(self, clause: str, *values: object) -> None:
        """Add ``clause``, each ``{}`` in it the mark of the next of ``values``."""
        places = []
        for value in values:
            self.params.append(value)
            places.append(self.marks(len(self.params)))
        self.where.append(clause.format(*places))


def _text_filter(sql: _PageWhere, text: str | None, *, fts: bool) -> str | None:
    """Add a search's conditions; for SQLite, return the FTS5 MATCH its long words make."""
    if text is None:
        return None
    wanted = search.words(text)
    match = search.fts_match(wanted) if fts else None
    for word in wanted:
        if len(word) < search.TRIGRAM:
            sql.add("instr(r.search, {}) > 0" if fts else "strpos(r.search, {}) > 0", word)
        elif not fts:
            sql.add("r.search LIKE {}", search.like_pattern(word))
    return match


def request_page(rows: Sequence[Sequence[Any]], limit: int) -> Page:
    """The page that rows of ``created_us, id, data`` (one more than ``limit`` when
    another page follows) make."""
    items = [stored_request(r[2]) for r in rows[:limit]]
    more = len(rows) > limit
    cursor = encode_cursor(rows[limit - 1][0], rows[limit - 1][1]) if more else None
    return Page(items=items, next_cursor=cursor)


AUDIT: Table[tuple[object, ...]] = Table(
    "audit",
    (
        "seq",
        "request_id",
        "at",
        "action",
        "actor",
        "from_status",
        "to_status",
        "details",
        "prev_hash",
        "hash",
    ),
    lambda row: row,
)
"""The audit chain: its rows are made by :func:`chain_audit`, keyed by ``seq``, and read
back by :func:`audit_entry`."""

_DETAILS: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


@dataclass(frozen=True)
class AuditChain:
    """A write's audit entries, numbered and chained after the stored head."""

    rows: list[tuple[object, ...]]
    """One row an entry, in :data:`AUDIT`'s column order."""
    entries: list[AuditEntry]
    seq: int
    """The new head's seq (the head's, when there are no entries)."""
    hash: str
    """The new head's hash (the previous one, when there are no entries)."""


def chain_audit(drafts: Iterable[AuditDraft], at: datetime, seq: int, prev: str) -> AuditChain:
    """Number ``drafts`` after ``seq`` and link each to the hash before it (``prev``)."""
    drafts = list(drafts)
    fields = [audit_fields(d, canonical_json(d.details)) for d in drafts]
    rows = chain_rows(fields, at.isoformat(), seq, prev)
    entries = [
        committed_entry(draft, seq=row[0], at=at, prev_hash=row[8], hash=row[9])
        for draft, row in zip(drafts, rows, strict=True)
    ]
    generic: list[tuple[object, ...]] = [*rows]
    return AuditChain(
        rows=generic, entries=entries, seq=seq + len(rows), hash=rows[-1][9] if rows else prev
    )


AuditRow: TypeAlias = tuple[int, str | None, str, str, str, str | None, str | None, str, str, str]
"""A row of :data:`AUDIT`: seq, request_id, at, action, actor, from_status, to_status,
details, prev_hash, hash."""


AuditFields: TypeAlias = tuple[str, str, str | None, str | None, str | None, str]
"""An audit draft as plain values: action, actor, request id, statuses from and to, and its
canonical details JSON."""


def audit_fields(draft: AuditDraft, details_json: str) -> AuditFields:
    """``draft``'s :data:`AuditFields`, given ``canonical_json(draft.details)``."""
    return (
        draft.action,
        draft.actor,
        draft.request_id,
        draft.from_status,
        draft.to_status,
        details_json,
    )


def chain_rows(audit: Sequence[AuditFields], at: str, seq: int, prev: str) -> list[AuditRow]:
    """The rows of :data:`AUDIT` that number the drafts ``audit`` holds after ``seq``, stamped
    ``at`` (ISO form), and link each to the hash before it (``prev``)."""
    rows: list[AuditRow] = []
    for action, actor, request_id, from_status, to_status, details_json in audit:
        seq += 1
        digest = fields_hash(
            prev, seq, at, (action, actor, request_id, from_status, to_status), details_json
        )
        rows.append(
            (seq, request_id, at, action, actor, from_status, to_status, details_json, prev, digest)
        )
        prev = digest
    return rows


def audit_entry(row: Sequence[Any]) -> AuditEntry:
    """The entry a row of :data:`AUDIT` holds."""
    return AuditEntry(
        seq=row[0],
        request_id=row[1],
        at=datetime.fromisoformat(row[2]),
        action=row[3],
        actor=row[4],
        from_status=row[5],
        to_status=row[6],
        details=_DETAILS.validate_json(row[7]),
        prev_hash=row[8],
        hash=row[9],
    )


def event_from_row(row: Sequence[Any]) -> Event:
    """The event a row of ``seq, type, at, data`` holds."""
    return Event(
        seq=row[0],
        type=row[1],
        at=datetime.fromisoformat(row[2]),
        request=stored_request(row[3]),
    )
