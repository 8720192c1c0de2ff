"""What only the SQLite store has: a file, a schema version, WAL, several processes."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from signoff.domain.audit import verify_chain
from signoff.domain.requests import RequestAdapter
from signoff.errors import InvalidRequest, StoreUnavailable
from signoff.store.base import DuplicateRequest, VersionConflict, Write, to_micros
from signoff.store.sqlite import SQLiteStore, sqlite_path_from_url
from signoff.store.sqlite_migrations import MIGRATIONS, SCHEMA_VERSION
from tests.store.test_store_suite import T0, approval, insert, pending, task


async def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    """A committed request and its audit chain are there after the store is reopened."""
    path = tmp_path / "deep" / "missing" / "signoff.db"
    request = approval()
    first = SQLiteStore(path)
    await first.open()
    await first.commit(insert(request))
    await first.close()
    second = SQLiteStore(path)
    await second.open()
    try:
        assert await second.get_request(request.id) == request
        assert verify_chain(await second.list_audit(), head=await second.audit_head()).ok
    finally:
        await second.close()


async def test_schema_version_recorded_and_newer_refused(tmp_path: Path) -> None:
    """The file records its schema version; a file from a newer signoff is refused clearly."""
    path = tmp_path / "signoff.db"
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreUnavailable, match="upgrade signoff"):
        await SQLiteStore(path).open()


async def test_version_2_database_upgrades_and_keeps_its_rows(tmp_path: Path) -> None:
    """A file at schema version 2 migrates to the current version, keeps its rows, takes tasks."""
    path = tmp_path / "signoff.db"
    request = approval(tool_call_id="call-1")
    with sqlite3.connect(path) as db:
        for migration in MIGRATIONS[:2]:
            db.executescript(migration)
        db.execute(
            "INSERT INTO requests (id, kind, status, session_id, tool_name, tool_call_id, "
            "requested_by, idempotency_key, created_us, expires_us, version, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                request.id,
                request.kind,
                request.status,
                request.session_id,
                request.tool_name,
                request.tool_call_id,
                request.requested_by,
                None,
                to_micros(request.created_at),
                None,
                request.version,
                RequestAdapter.dump_json(request).decode(),
            ),
        )
        db.execute("PRAGMA user_version = 2")
    db.close()
    store = SQLiteStore(path)
    await store.open()
    try:
        assert await store.get_request(request.id) == request
        paused = task(status="Paused", pending=pending(request.id))
        await store.commit(Write(at=T0, task=paused))
        assert await store.find_task(request.id) == paused
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("SELECT count(*) FROM tasks").fetchone()[0] == 1
    db.close()


async def test_version_4_database_upgrades_to_call_ids_per_requester(tmp_path: Path) -> None:
    """A version-4 file upgrades so another agent may reuse a session and tool_call_id."""
    path = tmp_path / "signoff.db"
    alices = approval(tool_call_id="call-1", requested_by="alice")
    with sqlite3.connect(path) as db:
        for migration in MIGRATIONS[:4]:
            db.executescript(migration)
        db.execute(
            "INSERT INTO requests (id, kind, status, session_id, tool_name, tool_call_id, "
            "requested_by, idempotency_key, created_us, expires_us, version, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                alices.id,
                alices.kind,
                alices.status,
                alices.session_id,
                alices.tool_name,
                alices.tool_call_id,
                alices.requested_by,
                None,
                to_micros(alices.created_at),
                None,
                alices.version,
                RequestAdapter.dump_json(alices).decode(),
            ),
        )
        db.execute("PRAGMA user_version = 4")
    db.close()
    store = SQLiteStore(path)
    await store.open()
    try:
        bobs = approval(tool_call_id="call-1", requested_by="bob")
        await store.commit(insert(bobs))
        assert await store.get_request(alices.id) == alices
        assert await store.get_request(bobs.id) == bobs
        with pytest.raises(DuplicateRequest) as caught:
            await store.commit(insert(approval(tool_call_id="call-1", requested_by="alice")))
        assert caught.value.existing_id == alices.id
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        with pytest.raises(sqlite3.IntegrityError):
            db.execute(
                "INSERT INTO requests (id, kind, status, session_id, tool_call_id, requested_by, "
                "created_us, version, data) VALUES ('r', 'approval', 'pending', 's1', 'call-1', "
                "'bob', 0, 1, '{}')"
            )
    db.close()


async def test_two_stores_on_one_file_have_one_winner(tmp_path: Path) -> None:
    """Two stores on one file (as two processes would be) never both apply one version."""
    path = tmp_path / "signoff.db"
    a, b = SQLiteStore(path), SQLiteStore(path)
    await a.open()
    await b.open()
    try:
        request = approval()
        await a.commit(insert(request))
        mine = request.model_copy(update={"status": "approved", "version": 2})
        theirs = request.model_copy(update={"status": "rejected", "version": 2})
        results = await asyncio.gather(
            a.commit(Write(at=T0, update=mine)),
            b.commit(Write(at=T0, update=theirs)),
            return_exceptions=True,
        )
        conflicts = [r for r in results if isinstance(r, VersionConflict)]
        assert len(conflicts) == 1
        stored = await b.get_request(request.id)
        assert stored is not None and stored.version == 2
    finally:
        await a.close()
        await b.close()


async def test_pending_by_session_uses_an_index(tmp_path: Path) -> None:
    """Listing one session's pending requests is answered from an index, not a table scan."""
    path = tmp_path / "signoff.db"
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as db:
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT created_us, id, data FROM requests "
            "WHERE status = ? AND session_id = ? AND (created_us, id) < (?, ?) "
            "ORDER BY created_us DESC, id DESC LIMIT 51",
            ("pending", "s1", 10**18, "z"),
        ).fetchall()
    db.close()
    text = " ".join(str(row[-1]) for row in plan)
    assert "USING INDEX requests_session_status" in text
    assert "TEMP B-TREE" not in text


async def test_tasks_of_one_status_use_an_index(tmp_path: Path) -> None:
    """Listing tasks of one status, newest first, is answered from an index without sorting."""
    path = tmp_path / "signoff.db"
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as db:
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT data FROM tasks WHERE status = ? "
            "ORDER BY created_us DESC, id DESC LIMIT 100",
            ("Paused",),
        ).fetchall()
    db.close()
    text = " ".join(str(row[-1]) for row in plan)
    assert "USING INDEX tasks_status" in text
    assert "TEMP B-TREE" not in text


def test_sqlite_urls() -> None:
    """sqlite:/// URLs name relative and absolute files; anything else is refused."""
    assert sqlite_path_from_url("sqlite:///data/x.db") == Path("data/x.db")
    assert sqlite_path_from_url("sqlite:////abs/x.db") == Path("/abs/x.db")
    for bad in ("sqlite://x.db", "sqlite:///", "postgres://h/db"):
        with pytest.raises(InvalidRequest):
            sqlite_path_from_url(bad)


async def test_unwritable_location_is_store_unavailable(tmp_path: Path) -> None:
    """A database path that cannot be created fails as StoreUnavailable, not a raw error."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreUnavailable):
        await SQLiteStore(blocker / "signoff.db").open()
