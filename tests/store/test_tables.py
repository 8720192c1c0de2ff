"""signoff.store.tables: the table mapping both SQL stores share agrees with their schemas."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from signoff.store import tables
from signoff.store.base import RequestQuery, encode_cursor
from signoff.store.sqlite import SQLiteStore
from tests.conftest import drop_schema, new_schema, postgres_dsn

MAPPED = (
    tables.REQUESTS,
    tables.TASKS,
    tables.GRANTS,
    tables.WEBHOOKS,
    tables.DELIVERIES,
    tables.TOKENS,
    tables.SESSIONS,
    tables.AUDIT,
)


async def test_every_mapped_table_has_exactly_the_sqlite_schemas_columns(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    await store.close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        for table in MAPPED:
            schema = {row[1] for row in conn.execute(f"PRAGMA table_info({table.name})")}
            assert set(table.columns) == schema, table.name


async def test_every_mapped_table_has_exactly_the_postgres_schemas_columns() -> None:
    pytest.importorskip("asyncpg", reason="needs the postgres extra")
    import asyncpg

    from signoff.store.postgres import PostgresStore

    dsn, schema = await postgres_dsn(), new_schema()
    store = PostgresStore(dsn, schema=schema)
    try:
        await store.open()
        await store.close()
        conn = await asyncpg.connect(dsn)
        try:
            for table in MAPPED:
                rows = await conn.fetch(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = $1 AND table_name = $2",
                    schema,
                    table.name,
                )
                assert set(table.columns) == {r[0] for r in rows}, table.name
        finally:
            await conn.close()
    finally:
        await drop_schema(dsn, schema)


def test_an_update_sets_every_column_but_the_id_and_matches_the_previous_version() -> None:
    sql = tables.update_sql(tables.TASKS, tables.numbered)
    assert sql == (
        "UPDATE tasks SET status = $1, version = $2, created_us = $3, data = $4 "
        "WHERE id = $5 AND version = $6"
    )
    row = ("t1", "running", 3, 7, "{}")
    assert tables.update_values(row, 3) == ("running", 3, 7, "{}", "t1", 2)


def test_insert_marks_one_parameter_a_column() -> None:
    assert tables.insert_sql(tables.WEBHOOKS, tables.qmarks, verb="INSERT OR REPLACE") == (
        "INSERT OR REPLACE INTO webhooks (id, created_us, data) VALUES (?, ?, ?)"
    )
    assert tables.insert_sql(tables.WEBHOOKS, tables.numbered).endswith("VALUES ($1, $2, $3)")


def test_a_page_query_numbers_its_parameters_in_order() -> None:
    cursor = encode_cursor(42, "r1")
    page = tables.request_page_sql(
        RequestQuery(status="pending", requested_by="agent", limit=10, cursor=cursor),
        tables.numbered,
    )
    assert page.sql == (
        "SELECT r.created_us, r.id, r.data FROM requests r WHERE r.status = $1 "
        "AND r.requested_by = $2 AND (r.created_us, r.id) < ($3, $4) "
        "ORDER BY r.created_us DESC, r.id DESC LIMIT $5"
    )
    assert page.params == ["pending", "agent", 42, "r1", 11]
    assert page.limit == 10
    searched = tables.request_page_sql(
        RequestQuery(status="ended", text="Rm 5%", cursor=cursor), tables.numbered
    )
    assert searched.sql == (
        "SELECT r.created_us, r.id, r.data FROM requests r WHERE r.status <> 'pending' "
        "AND strpos(r.search, $1) > 0 AND strpos(r.search, $2) > 0 "
        "AND (r.created_us, r.id) < ($3, $4) ORDER BY r.created_us DESC, r.id DESC LIMIT $5"
    )
    assert searched.params == ["rm", "5%", 42, "r1", 51]


def test_duplicates_are_looked_for_by_call_then_by_key_among_the_requesters_own() -> None:
    assert tables.duplicate_lookups("s1", "c1", "agent", "k1") == [
        (("session_id", "tool_call_id", "requested_by"), ("s1", "c1", "agent")),
        (("requested_by", "idempotency_key"), ("agent", "k1")),
    ]
    assert tables.duplicate_lookups("s1", None, "agent", None) == []
