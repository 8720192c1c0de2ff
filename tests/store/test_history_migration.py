"""History's migration: requests stored before it are found by person and by text after it,
and the SQLite pages are read from indexes in the page's order (no sort of every match)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from signoff.domain.requests import (
    ApprovalRequest,
    Question,
    QuestionsRequest,
    Request,
    RequestAdapter,
)
from signoff.store.base import RequestQuery, Store, to_micros
from signoff.store.sqlite import SQLiteStore
from signoff.store.tables import qmarks, request_page_sql
from tests.conftest import drop_schema, new_schema, pg_execute, postgres_dsn
from tests.store.test_history_suite import at, ids, seed
from tests.store.test_store_suite import approval

_OLD_COLUMNS = (
    "id, kind, status, session_id, tool_name, tool_call_id, requested_by, idempotency_key, "
    "created_us, expires_us, version, data"
)


def old_row(r: Request) -> tuple[object, ...]:
    """A request's row as the schema before history's migration held it."""
    call = r if isinstance(r, ApprovalRequest) else None
    return (
        r.id,
        r.kind,
        r.status,
        r.session_id,
        call.tool_name if call else None,
        None,
        r.requested_by,
        None,
        to_micros(r.created_at),
        None,
        r.version,
        RequestAdapter.dump_json(r).decode(),
    )


def old_requests() -> list[Request]:
    """The seed, and a request with a NUL in an argument and in its prompt (JSON keeps
    them as \\u0000, which PostgreSQL's text cannot hold)."""
    nul = QuestionsRequest(
        id="req_nul",
        session_id="s9",
        requested_by="agent:nul",
        allowed_decisions=("approve", "answer", "reject"),
        prompt="nul\x00prompt",
        questions=(Question(id="q", text="why?"),),
        **at(8),
    )
    arg = approval(tool_args={"x": "nul\x00arg"}, requested_by="agent:nul", **at(7))
    return [*seed(), arg, nul]


async def found_as_before(store: Store, requests: list[Request]) -> None:
    """The seed's filters and searches find the requests stored before the migration."""
    n = {i + 1: r.id for i, r in enumerate(requests)}
    assert await ids(store, text="nul", requested_by="agent:nul") == [n[8], n[7]]
    assert await ids(store, text="nul arg") == [n[7]]
    assert await ids(store, decided_by="alice") == [n[6], n[2]]
    assert await ids(store, text="rm build") == [n[2], n[1]]
    assert await ids(store, text="deploy canary") == [n[4]]
    assert await ids(store, text="NEAR(") == [n[5]]
    assert await ids(store, text="école") == [n[6]]
    assert await ids(store, text="50%_off", status="ended") == [n[3]]


async def test_sqlite_version_6_rows_are_backfilled(tmp_path: Path) -> None:
    """A version-6 file's requests get their person and search text, and the index."""
    from signoff.store.sqlite_migrations import MIGRATIONS

    path = tmp_path / "signoff.db"
    requests = old_requests()
    with sqlite3.connect(path) as db:
        for migration in MIGRATIONS[:6]:
            db.executescript(migration)
        db.executemany(
            f"INSERT INTO requests ({_OLD_COLUMNS}) VALUES ({', '.join('?' * 12)})",
            [old_row(r) for r in requests],
        )
        db.execute("PRAGMA user_version = 6")
    db.close()
    store = SQLiteStore(path)
    await store.open()
    try:
        await found_as_before(store, requests)
    finally:
        await store.close()


async def test_postgres_version_4_rows_are_backfilled() -> None:
    """A version-4 schema's requests get their person and search text, and the index."""
    asyncpg = pytest.importorskip("asyncpg", reason="needs the postgres extra")
    from signoff.store.postgres import PostgresStore
    from signoff.store.postgres_migrations import MIGRATIONS

    dsn, schema = await postgres_dsn(), new_schema()
    requests = old_requests()
    await pg_execute(f"CREATE SCHEMA {schema}", dsn)
    try:
        connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
        try:
            for migration in MIGRATIONS[:4]:
                await connection.execute(migration)
            await connection.execute(
                "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), "
                "version INTEGER NOT NULL); INSERT INTO schema_version VALUES (1, 4)"
            )
            marks = ", ".join(f"${n}" for n in range(1, 13))
            await connection.executemany(
                f"INSERT INTO requests ({_OLD_COLUMNS}) VALUES ({marks})",
                [old_row(r) for r in requests],
            )
        finally:
            await connection.close()
        store = PostgresStore(dsn, schema=schema)
        await store.open()
        try:
            await found_as_before(store, requests)
        finally:
            await store.close()
        connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
        try:
            indexes = await connection.fetch(
                "SELECT indexname FROM pg_indexes WHERE schemaname = $1", schema
            )
        finally:
            await connection.close()
        assert "requests_search" in {row[0] for row in indexes}
    finally:
        await drop_schema(dsn, schema)


@pytest.mark.parametrize(
    ("query", "index"),
    [
        (RequestQuery(status="ended"), "requests_ended"),
        (RequestQuery(decided_by="alice"), "requests_decider"),
        (RequestQuery(tool_name="shell"), "requests_tool"),
        (RequestQuery(requested_by="agent:x", cursor="MTB8cmVxX3g"), "requests_requester"),
        (RequestQuery(text="deploy canary"), "SCAN f VIRTUAL TABLE INDEX"),
        (RequestQuery(text="deploy", cursor="MTB8cmVxX3g"), "SCAN f VIRTUAL TABLE INDEX"),
    ],
)
async def test_sqlite_pages_read_an_index_in_order(
    tmp_path: Path, query: RequestQuery, index: str
) -> None:
    """Each filter's page walks an index in the page's order: no temporary sort."""
    path = tmp_path / "signoff.db"
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    page = request_page_sql(query, qmarks, fts=True)
    with sqlite3.connect(path) as db:
        plan = db.execute(f"EXPLAIN QUERY PLAN {page.sql}", page.params).fetchall()
    db.close()
    text = " ".join(str(row[-1]) for row in plan)
    assert index in text
    assert "TEMP B-TREE" not in text
