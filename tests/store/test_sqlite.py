"""What only the SQLite store has: a file, a schema version, WAL, several processes."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import cast

import pytest

from signoff.domain.audit import AuditDraft, verify_chain
from signoff.domain.decisions import Approve, DecisionRecord
from signoff.domain.events import EventDraft
from signoff.domain.principals import Principal
from signoff.domain.requests import RequestAdapter
from signoff.errors import InvalidRequest, StoreUnavailable
from signoff.service import Service
from signoff.store import sqlite_writes, tables
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


def _wal_pages(path: Path) -> set[int]:
    """The database pages the WAL file beside ``path`` holds frames of."""
    wal = Path(f"{path}-wal").read_bytes()
    page_size = int.from_bytes(wal[8:12], "big")
    frames = range(32, len(wal) - 24 - page_size + 1, 24 + page_size)
    return {int.from_bytes(wal[at : at + 4], "big") for at in frames}


def _roots(path: Path) -> dict[str, int]:
    """Each table's and index's root page; in a file of a few rows, its only page."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0").fetchall()
    db.close()
    return {str(name): int(page) for name, page in rows}


async def test_a_change_writes_no_index_of_what_was_fixed_at_submit(tmp_path: Path) -> None:
    """Claiming a decided call writes no page of the indexes over columns fixed at submit
    (kind, session's call ids, requester, tool, creation time) nor of who decided."""
    path = tmp_path / "signoff.db"
    store = SQLiteStore(path)
    await store.open()
    try:
        request = approval(tool_call_id="call-1", idempotency_key="key-1")
        await store.commit(insert(request))
        record = DecisionRecord(decision=Approve(), decided_by="pat", decided_at=T0)
        approved = request.model_copy(
            update={"status": "approved", "version": 2, "decision": record}
        )
        await store.commit(Write(at=T0, update=approved))
        with sqlite3.connect(path) as db:
            busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        db.close()
        assert busy == 0  # the WAL is empty: what follows is the claim's alone
        claimed = approved.model_copy(update={"status": "executing", "version": 3})
        await store.commit(
            Write(
                at=T0,
                update=claimed,
                audit=(AuditDraft(action="claim", actor="agent", request_id=request.id),),
                events=(EventDraft(type="status", request=claimed),),
            )
        )
        written = _wal_pages(path)
        stored = await store.get_request(request.id)
    finally:
        await store.close()
    roots = _roots(path)
    assert stored == claimed
    assert roots["requests_status"] in written  # the WAL is read right
    untouched = (
        "requests_call",
        "requests_idem",
        "requests_created",
        "requests_requester",
        "requests_tool",
        "requests_decider",
        "request_search",
    )
    assert [name for name in untouched if roots[name] in written] == []


async def test_every_column_of_a_request_stays_true_to_its_data(tmp_path: Path) -> None:
    """After each step of approved, rejected and canceled lives, every column of the
    request's row is what its stored data makes (a change sets only what it moves)."""
    path = tmp_path / "signoff.db"
    agent = Principal(name="agent", role="agent")
    person = Principal(name="pat", role="approver")
    async with Service(SQLiteStore(path), read_file=None) as service:
        steps: list[str] = []

        async def submit() -> str:
            new = {"session_id": "s", "tool_name": "shell", "tool_args": {"command": "ls"}}
            made = await service.submit({**new, "tool_call_id": f"call-{len(steps)}"}, agent)
            steps.append(made.request.id)
            return made.request.id

        done = await submit()
        await service.decide(done, {"type": "approve"}, person)
        steps.append(done)
        await service.claim(done, {"command": "ls"}, agent)
        steps.append(done)
        await service.complete(done, agent, result="ok")
        steps.append(done)
        rejected = await submit()
        await service.decide(rejected, {"type": "reject", "reason": "no"}, person)
        steps.append(rejected)
        await service.cancel(await submit(), agent)
    with sqlite3.connect(path) as db:
        columns = ", ".join(tables.REQUESTS.columns)
        rows = db.execute(f"SELECT {columns} FROM requests").fetchall()
    db.close()
    assert len(rows) == 3
    for row in rows:
        assert row == tables.REQUESTS.values(RequestAdapter.validate_json(row[-1]))
    assert {row[tables.REQUESTS.columns.index("decided_by")] for row in rows} == {"pat", None}


async def test_every_kind_is_stored_as_the_request_union_writes_it(tmp_path: Path) -> None:
    """A request's row and events hold, byte for byte, the JSON the ``Request`` union's
    adapter makes (the store serializes each through its own kind), for every kind,
    pending and decided."""
    path = tmp_path / "signoff.db"
    agent = Principal(name="agent", role="agent")
    person = Principal(name="pat", role="approver")
    async with Service(SQLiteStore(path), read_file=None) as service:
        call = await service.submit(
            {"session_id": "s", "tool_name": "shell", "tool_args": {"n": 1.5, "é": [None]}}, agent
        )
        choice = await service.submit(
            {"session_id": "s", "kind": "choice", "prompt": "Where?", "options": ["a", "b"]},
            agent,
        )
        questions = await service.submit(
            {"session_id": "s", "kind": "questions", "questions": [{"id": "q", "text": "Why?"}]},
            agent,
        )
        await service.decide(call.request.id, {"type": "approve", "comment": "ok"}, person)
        await service.decide(choice.request.id, {"type": "choose", "choice": "b"}, person)
        await service.decide(
            questions.request.id, {"type": "answer", "answers": {"q": "because"}}, person
        )
    with sqlite3.connect(path) as db:
        stored = db.execute("SELECT data FROM requests").fetchall()
        stored += db.execute("SELECT data FROM events").fetchall()
    db.close()
    kinds = set()
    for (text,) in stored:
        request = RequestAdapter.validate_json(text)
        kinds.add((request.kind, request.status))
        assert text == RequestAdapter.dump_json(request).decode()
    assert {kind for kind, _ in kinds} == {"approval", "choice", "questions"}
    assert {status for _, status in kinds} == {"pending", "approved"}


async def test_a_failed_write_leaves_the_chain_head_where_it_was(tmp_path: Path) -> None:
    """A write that fails after chaining its audit entries (alone, or among others in one
    transaction) moves no head: the writes after it chain on, and the log verifies."""
    path = tmp_path / "signoff.db"
    store = SQLiteStore(path)
    await store.open()
    try:
        refused = approval()
        with sqlite3.connect(path) as db:
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON events "
                f"WHEN NEW.request_id = '{refused.id}' BEGIN SELECT RAISE(ABORT, 'no'); END"
            )
        db.close()
        with pytest.raises(StoreUnavailable):
            await store.commit(insert(refused))
        await store.commit(insert(approval()))
        writes = [insert(approval()), insert(refused), insert(approval())]
        results = await asyncio.gather(*map(store.commit, writes), return_exceptions=True)
        assert [isinstance(r, StoreUnavailable) for r in results] == [False, True, False]
        entries = await store.list_audit()
        report = verify_chain(entries, head=await store.audit_head())
    finally:
        await store.close()
    assert report.ok and report.entries == 3
    assert refused.id not in {e.request_id for e in entries}


def test_a_batch_runs_together_and_again_with_savepoints_only_when_one_fails(
    tmp_path: Path,
) -> None:
    """The writer runs a batch without a savepoint per write; when one write fails, the
    whole transaction is undone and the batch runs again, each write in its savepoint, so
    the others commit, the failing one leaves no row, and the chain has no hole."""
    path = tmp_path / "signoff.db"
    conn = sqlite_writes.open_for_writing(path)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        first = [sqlite_writes.prepare(insert(approval())).plan for _ in range(3)]
        outcomes = sqlite_writes.run_batch(conn, path, first)
        assert [error for _, error in outcomes] == [None, None, None]
        assert not [s for s in statements if s.startswith("SAVEPOINT")]
        assert sum(s == "BEGIN IMMEDIATE" for s in statements) == 1

        refused = approval()
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON events "
            f"WHEN NEW.request_id = '{refused.id}' BEGIN SELECT RAISE(ABORT, 'no'); END"
        )
        kept = [approval(), approval()]
        plans = [sqlite_writes.prepare(insert(r)).plan for r in (kept[0], refused, kept[1])]
        statements.clear()
        outcomes = sqlite_writes.run_batch(conn, path, plans)
        assert [type(error).__name__ for _, error in outcomes] == [
            "NoneType",
            "StoreUnavailable",
            "NoneType",
        ]
        assert sum(s == "BEGIN IMMEDIATE" for s in statements) == 2
        assert sum(s == "SAVEPOINT write" for s in statements) == 3
        ids = {row[0] for row in conn.execute("SELECT id FROM requests")}
        assert {r.id for r in kept} <= ids and refused.id not in ids
        audit = [
            tables.audit_entry(row) for row in conn.execute("SELECT * FROM audit ORDER BY seq")
        ]
        assert [e.seq for e in audit] == [1, 2, 3, 4, 5]
        assert verify_chain(audit).ok
        answered = [cast(sqlite_writes.Answer, answer) for answer, _ in outcomes if answer]
        assert [rows[0][0] for rows, _ in answered] == [4, 5]
    finally:
        conn.close()


async def test_a_store_reads_what_another_process_wrote_after_it(tmp_path: Path) -> None:
    """A request and events another store on the same file wrote since are read as stored,
    not as this store last wrote or read them (it keeps its own writes parsed)."""
    path = tmp_path / "signoff.db"
    mine, theirs = SQLiteStore(path), SQLiteStore(path)
    await mine.open()
    await theirs.open()
    try:
        request = approval()
        await mine.commit(insert(request))
        assert await mine.get_request(request.id) == request
        changed = request.model_copy(update={"status": "rejected", "version": 2})
        await theirs.commit(
            Write(at=T0, update=changed, events=(EventDraft(type="decided", request=changed),))
        )
        with pytest.raises(VersionConflict):
            await mine.commit(Write(at=T0, update=request.model_copy(update={"version": 2})))
        assert await mine.get_request(request.id) == changed
        events = await mine.list_events()
    finally:
        await mine.close()
        await theirs.close()
    assert [(e.seq, e.type, e.request) for e in events] == [
        (1, "created", request),
        (2, "decided", changed),
    ]
