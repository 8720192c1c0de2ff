"""What only the PostgreSQL store has: a schema version, several servers on one database, NOTIFY."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from signoff.config import open_store
from signoff.domain.audit import GENESIS_HASH, AuditDraft, entry_hash, verify_chain
from signoff.domain.events import EventDraft
from signoff.domain.grants import Grant
from signoff.domain.requests import ApprovalRequest, RequestAdapter
from signoff.errors import StoreUnavailable
from signoff.store import tables
from signoff.store.base import (
    Committed,
    DuplicateRequest,
    RequestQuery,
    VersionConflict,
    Write,
    to_micros,
)
from signoff.store.postgres_migrations import MIGRATIONS, SCHEMA_VERSION
from tests.conftest import drop_schema, new_schema, pg_execute, postgres_dsn
from tests.store.test_store_suite import T0, approval, insert

asyncpg = pytest.importorskip("asyncpg", reason="needs the postgres extra")

from signoff.store.postgres import EVENTS_CHANNEL, PostgresStore  # noqa: E402


@pytest.fixture
async def pg() -> AsyncIterator[tuple[str, str]]:
    """A reachable PostgreSQL's DSN and a fresh schema name, dropped after the test."""
    dsn, schema = await postgres_dsn(), new_schema()
    try:
        yield dsn, schema
    finally:
        await drop_schema(dsn, schema)


@pytest.fixture
async def two(pg: tuple[str, str]) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores with pools of their own on one schema, as two servers would have."""
    dsn, schema = pg
    a, b = PostgresStore(dsn, schema=schema), PostgresStore(dsn, schema=schema)
    await a.open()
    await b.open()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def test_migrations_are_idempotent_and_concurrent_opens_agree(pg: tuple[str, str]) -> None:
    """Opening again, or from several servers at once, migrates once and keeps every row."""
    dsn, schema = pg
    request = approval()
    first = PostgresStore(dsn, schema=schema)
    await first.open()
    await first.commit(insert(request))
    await first.close()
    stores = [PostgresStore(dsn, schema=schema) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        for store in stores:
            assert await store.get_request(request.id) == request
        assert verify_chain(await stores[0].list_audit(), head=await stores[0].audit_head()).ok
    finally:
        for store in stores:
            await store.close()
    connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        assert await connection.fetch("SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    finally:
        await connection.close()


async def test_fresh_schemas_open_concurrently(pg: tuple[str, str]) -> None:
    """Servers starting together on an empty schema all open; one of them migrates it."""
    dsn, schema = pg
    stores = [PostgresStore(dsn, schema=schema) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        await stores[0].commit(insert(approval()))
        assert await stores[3].last_event_seq() == 1
    finally:
        for store in stores:
            await store.close()


async def test_newer_schema_is_refused(pg: tuple[str, str]) -> None:
    """A database migrated by a newer signoff is refused with a clear, one-line message."""
    dsn, schema = pg
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    await store.close()
    await pg_execute(f"UPDATE {schema}.schema_version SET version = {SCHEMA_VERSION + 1}", dsn)
    with pytest.raises(StoreUnavailable, match="upgrade signoff") as caught:
        await PostgresStore(dsn, schema=schema).open()
    assert "\n" not in str(caught.value)


async def test_concurrent_commits_from_two_servers_keep_one_chain_and_log(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    """Two pools writing at once: one decision per request, a verifying chain, gap-free seqs."""
    a, b = two
    requests = [approval() for _ in range(30)]
    sides = itertools.cycle((a, b))
    seen_prefixes: list[list[int]] = []
    stop = asyncio.Event()

    async def watch() -> None:
        # A follower must never see seq n+1 before seq n has committed.
        while not stop.is_set():
            seen_prefixes.append([e.seq for e in await b.list_events()])
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    created = await asyncio.gather(*(next(sides).commit(insert(r)) for r in requests))
    decisions = []
    for r in requests:
        for store, status in ((a, "approved"), (b, "rejected")):
            changed = r.model_copy(update={"status": status, "version": 2})
            decisions.append(
                store.commit(
                    Write(
                        at=T0 + timedelta(seconds=1),
                        update=changed,
                        audit=(AuditDraft(action="decide", actor=status, request_id=r.id),),
                        events=(EventDraft(type="decided", request=changed),),
                    )
                )
            )
    results = await asyncio.gather(*decisions, return_exceptions=True)
    stop.set()
    await watcher
    winners = [res for res in results if isinstance(res, Committed)]
    assert len(winners) == 30
    assert all(isinstance(res, VersionConflict) for res in results if res not in winners)
    committed = [e.seq for c in (*created, *winners) for e in c.events]
    assert sorted(committed) == list(range(1, 61))
    events = await a.list_events()
    assert [e.seq for e in events] == list(range(1, 61))
    for request in requests:
        mine = [e for e in events if e.request.id == request.id]
        assert [e.type for e in mine] == ["created", "decided"]
    entries = await b.list_audit()
    report = verify_chain(entries, head=await a.audit_head())
    assert report.ok and report.entries == 60
    assert [e.seq for e in entries] == list(range(1, 61))
    assert all(prefix == list(range(1, len(prefix) + 1)) for prefix in seen_prefixes)


async def test_version_2_schema_upgrades_to_call_ids_per_requester(pg: tuple[str, str]) -> None:
    """A version-2 schema upgrades so another agent may reuse a session and tool_call_id."""
    dsn, schema = pg
    alices = approval(tool_call_id="call-1", requested_by="alice")
    await pg_execute(f"CREATE SCHEMA {schema}", dsn)
    connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        for migration in MIGRATIONS[:2]:
            await connection.execute(migration)
        await connection.execute(
            "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), "
            "version INTEGER NOT NULL); INSERT INTO schema_version VALUES (1, 2)"
        )
        await connection.execute(
            "INSERT INTO requests (id, kind, status, session_id, tool_name, tool_call_id, "
            "requested_by, created_us, version, data) "
            "VALUES ($1, 'approval', 'pending', 's1', 'shell', 'call-1', 'alice', $2, 1, $3)",
            alices.id,
            to_micros(alices.created_at),
            RequestAdapter.dump_json(alices).decode(),
        )
    finally:
        await connection.close()
    store = PostgresStore(dsn, schema=schema)
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
    connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        assert await connection.fetch("SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
        with pytest.raises(asyncpg.UniqueViolationError):
            await connection.execute(
                "INSERT INTO requests (id, kind, status, session_id, tool_call_id, requested_by, "
                "created_us, version, data) "
                "VALUES ('r', 'approval', 'pending', 's1', 'call-1', 'bob', 0, 1, '{}')"
            )
    finally:
        await connection.close()


async def test_duplicate_submit_on_two_servers_names_the_first(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    """The same tool call (or idempotency key) inserted on two servers at once stores one."""
    a, b = two
    for keys in ({"tool_call_id": "call-1"}, {"idempotency_key": "k1"}):
        first, second = approval(**keys), approval(**keys)
        results = await asyncio.gather(
            a.commit(insert(first)), b.commit(insert(second)), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, DuplicateRequest)]
        assert len(refused) == 1
        winner = first if isinstance(results[0], Committed) else second
        assert refused[0].existing_id == winner.id
    page = await a.list_requests(RequestQuery())
    assert len(page.items) == 2
    assert verify_chain(await b.list_audit(), head=await b.audit_head()).ok
    assert await b.last_event_seq() == 2


async def test_commit_notifies_listeners_with_the_last_seq(pg_database: str) -> None:
    """A commit with events NOTIFYs its last seq (first); no events or a failure: none."""
    store = PostgresStore(pg_database)
    await store.open()
    listener = await asyncpg.connect(pg_database)
    got: asyncio.Queue[str] = asyncio.Queue()
    await listener.add_listener(EVENTS_CHANNEL, lambda *args: got.put_nowait(args[3]))
    try:
        grant = Grant(
            id="grt_1",
            scope="always",
            tool_name="shell",
            requested_by="agent",
            created_by="alice",
            created_at=T0,
            expires_at=T0,
            source_request_id="req_x",
        )
        await store.commit(Write(at=T0, grants=(grant,)))
        request = approval()
        await store.commit(insert(request))
        assert (await asyncio.wait_for(got.get(), 5)).split("\n")[0] == "1"
        stale = request.model_copy(update={"status": "approved", "version": 3})
        with pytest.raises(VersionConflict):
            await store.commit(
                Write(at=T0, update=stale, events=(EventDraft(type="status", request=stale),))
            )
        both = [approval(), approval()]
        await store.commit(
            Write(at=T0, events=tuple(EventDraft(type="created", request=r) for r in both))
        )
        assert (await asyncio.wait_for(got.get(), 5)).split("\n")[0] == "3"
        await asyncio.sleep(0.05)
        assert got.empty()
    finally:
        await listener.close()
        await store.close()


async def test_ids_page_bytewise_whatever_the_locale(pg: tuple[str, str]) -> None:
    """Ids tied on created_at page in Python's string order (upper case before lower)."""
    dsn, schema = pg
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    try:
        ids = ["req_a", "req_B", "req_-x", "req_Z", "req_b", "req_0"]
        for request_id in ids:
            await store.commit(insert(approval(id=request_id)))
        seen: list[str] = []
        cursor = None
        while True:
            page = await store.list_requests(RequestQuery(limit=2, cursor=cursor))
            seen += [r.id for r in page.items]
            if (cursor := page.next_cursor) is None:
                break
        assert seen == sorted(ids, reverse=True)
    finally:
        await store.close()


async def test_unreachable_database_is_store_unavailable() -> None:
    """A refused connection fails as StoreUnavailable in one line, without the password."""
    store = PostgresStore("postgresql://signoff:s3cret@127.0.0.1:1/nowhere", connect_timeout=2)
    with pytest.raises(
        StoreUnavailable, match=r"cannot connect to PostgreSQL at 127\.0\.0\.1:1"
    ) as e:
        await store.open()
    assert "\n" not in str(e.value) and "s3cret" not in str(e.value)
    with pytest.raises(StoreUnavailable, match="not open"):
        await store.commit(insert(approval()))


async def commits_after_a_kill(store: PostgresStore, pid: int, dsn: str) -> list[object]:
    """Three writes after the server killed backend ``pid``: what each committed, or its
    StoreUnavailable."""
    await pg_execute(f"SELECT pg_terminate_backend({pid})", dsn)
    outcomes: list[object] = []
    for _ in range(3):
        try:
            outcomes.append(await store.commit(insert(approval())))
        except StoreUnavailable as exc:
            outcomes.append(exc)
    return outcomes


async def test_a_killed_connection_is_replaced(pg: tuple[str, str]) -> None:
    """A connection the server dropped fails calls only as StoreUnavailable, then is replaced."""
    dsn, schema = pg
    store = PostgresStore(dsn, schema=schema, max_size=1)
    await store.open()
    try:
        await store.commit(insert(approval()))
        pid = await store._pool.fetchval("SELECT pg_backend_pid()")  # the pool's one connection
        outcomes = await commits_after_a_kill(store, int(pid), dsn)
        assert isinstance(outcomes[-1], Committed)
        assert await store.last_event_seq() == 1 + sum(isinstance(o, Committed) for o in outcomes)
    finally:
        await store.close()


def sender_pid(store: PostgresStore) -> int:
    """The backend of the connection the store keeps for sending its one-statement writes."""
    sender = store._sender
    assert sender is not None, "no connection kept for sending"
    return int(sender.get_server_pid())


async def test_writes_keep_one_connection_and_a_killed_one_is_replaced(
    pg: tuple[str, str],
) -> None:
    """A request's writes go one after another on one connection kept from the pool; when
    the server drops it, one write at most fails as StoreUnavailable and the next commits on
    another connection."""
    dsn, schema = pg
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    try:
        await store.commit(insert(approval()))
        pid = sender_pid(store)
        for _ in range(3):
            await store.commit(insert(approval()))
            assert sender_pid(store) == pid
        outcomes = await commits_after_a_kill(store, pid, dsn)
        assert sum(isinstance(o, StoreUnavailable) for o in outcomes) <= 1
        assert isinstance(outcomes[-1], Committed)
        assert sender_pid(store) != pid
        assert await store.last_event_seq() == 4 + sum(isinstance(o, Committed) for o in outcomes)
    finally:
        await store.close()


async def test_a_write_cancelled_on_its_way_gives_its_connection_back(
    pg: tuple[str, str],
) -> None:
    """A write cancelled while the database holds it (behind another transaction's lock on
    the log head) stores nothing and gives its connection back: the next write commits on a
    connection of its own, and the store closes."""
    dsn, schema = pg
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    blocker = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        await store.commit(insert(approval()))
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute("SELECT 1 FROM log_head WHERE id = 1 FOR UPDATE")
        held = asyncio.create_task(store.commit(insert(approval())))
        await asyncio.sleep(0.3)
        assert not held.done()
        held.cancel()
        with pytest.raises(asyncio.CancelledError):
            await held
        assert store._sender is None  # given back to the pool
        await holding.rollback()
        await store.commit(insert(approval()))
        assert await store.last_event_seq() == 2
        assert store._sender is not None
    finally:
        await blocker.close()
        await asyncio.wait_for(store.close(), 10)


def test_postgres_urls_open_a_postgres_store() -> None:
    """postgresql:// and postgres:// database URLs name a PostgresStore keeping the DSN."""
    for url in ("postgresql://u@h/db", "postgres://u@h:5433/db"):
        store = open_store(url)
        assert isinstance(store, PostgresStore) and store.dsn == url


def test_schema_names_are_checked() -> None:
    """A schema name that is not a plain lower-case identifier is refused before any SQL."""
    with pytest.raises(ValueError, match="schema"):
        PostgresStore("postgresql://h/db", schema='x"; DROP TABLE requests; --')


def decided(request: ApprovalRequest, actor: str, details: dict[str, object]) -> Write:
    """The write approving ``request``: its next version, one audit entry, one event."""
    changed = request.model_copy(update={"status": "approved", "version": request.version + 1})
    return Write(
        at=T0 + timedelta(seconds=1),
        update=changed,
        audit=(AuditDraft(action="decide", actor=actor, request_id=request.id, details=details),),
        events=(EventDraft(type="decided", request=changed),),
    )


async def test_a_request_write_is_one_statement(pg: tuple[str, str]) -> None:
    """Submitting and deciding each send one statement, BEGIN and COMMIT folded in."""
    dsn, schema = pg
    store = PostgresStore(dsn, schema=schema, min_size=1, max_size=1)
    await store.open()
    sent: list[str] = []
    try:
        async with store._pool.acquire() as conn:  # the pool's one connection
            conn.add_query_logger(lambda record: sent.append(record.query))
        await store.commit(insert(approval()))  # asyncpg prepares and introspects once
        request = approval()
        sent.clear()
        await store.commit(insert(request))
        await store.commit(decided(request, "alice", {}))
        assert len(sent) == 2, sent
        with pytest.raises(VersionConflict):
            await store.commit(decided(request, "bob", {}))
        assert [e.seq for e in await store.list_events()] == [1, 2, 3]
    finally:
        await store.close()


async def test_the_chain_hashed_in_the_database_verifies(pg: tuple[str, str]) -> None:
    """Entries chained by the database carry entry_hash's hashes, whatever their text holds."""
    dsn, schema = pg
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    odd = 'Zoë "q" \\ \n\t\u2028 😀 </script>'  # a NUL is no text column's; JSON escapes it
    try:
        requests = [approval(), approval()]
        for request in requests:
            await store.commit(insert(request))
        committed = await store.commit(decided(requests[0], odd, {"why": odd + "\x00", "n": [1.5]}))
        two = Write(
            at=T0 + timedelta(seconds=2),
            audit=(
                AuditDraft(action="note", actor="a", request_id=None, details={odd: {"k": odd}}),
                AuditDraft(action="note", actor=odd, request_id=requests[1].id, to_status="x"),
            ),
        )
        both = await store.commit(two)
        entries = await store.list_audit()
        assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
        assert entries[2:] == [*committed.audit, *both.audit]
        for entry in entries:
            draft = AuditDraft(
                action=entry.action,
                actor=entry.actor,
                request_id=entry.request_id,
                from_status=entry.from_status,
                to_status=entry.to_status,
                details=entry.details,
            )
            assert entry.hash == entry_hash(
                prev_hash=entry.prev_hash, seq=entry.seq, at=entry.at, draft=draft
            )
        report = verify_chain(entries, head=await store.audit_head())
        assert report.ok and report.entries == 5
    finally:
        await store.close()


async def test_a_version_5_database_keeps_its_chain_after_the_upgrade(
    pg: tuple[str, str],
) -> None:
    """A database written before migration 6 upgrades, and new entries chain onto its head."""
    dsn, schema = pg
    old = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        await old.execute(f"CREATE SCHEMA {schema}")
        await old.execute(
            "CREATE TABLE schema_version "
            "(id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        )
        for sql in MIGRATIONS[:5]:
            await old.execute(sql)
        await old.execute("INSERT INTO schema_version VALUES (1, 5)")
        # what a version-5 server stored: one entry chained in Python, one event
        draft = AuditDraft(action="submit", actor="agent", request_id="req_old", to_status="p")
        digest = entry_hash(prev_hash=GENESIS_HASH, seq=1, at=T0, draft=draft)
        await old.execute(
            "INSERT INTO audit VALUES "
            "(1, 'req_old', $1, 'submit', 'agent', NULL, 'p', '{}', $2, $3)",
            T0.isoformat(),
            GENESIS_HASH,
            digest,
        )
        await old.execute(
            "UPDATE log_head SET audit_seq = 1, audit_hash = $1, event_seq = 7", digest
        )
    finally:
        await old.close()
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    try:
        request = approval()
        committed = await store.commit(insert(request))
        assert [e.seq for e in committed.events] == [8]
        assert [(e.seq, e.prev_hash) for e in committed.audit] == [(2, digest)]
        report = verify_chain(await store.list_audit(), head=await store.audit_head())
        assert report.ok and report.entries == 2
    finally:
        await store.close()


async def test_a_version_6_database_keeps_its_chain_and_notifies_its_events_after_the_upgrade(
    pg: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written by migration 6's function, upgraded to the current schema: one chain, and
    NOTIFYs carry events."""
    dsn, schema = pg
    from signoff.store import postgres

    monkeypatch.setattr(postgres, "MIGRATIONS", MIGRATIONS[:6])
    monkeypatch.setattr(postgres, "SCHEMA_VERSION", 6)
    old = PostgresStore(dsn, schema=schema)
    await old.open()
    # migration 6's function, called as the code of that version called it: no ``carry``
    kinds = postgres._APPEND_PARAMETERS[:-1]
    marks = ", ".join(f"${n}::{kind}" for n, kind in enumerate(kinds, start=1))
    try:
        async with old._pool.acquire() as conn:
            for _ in range(3):
                values = postgres._append_values(insert(approval()), tables.RequestJson(), True)
                await conn.fetchval(f"SELECT signoff_append({marks})", *values[:-1])
    finally:
        await old.close()
    monkeypatch.undo()
    listener = await asyncpg.connect(dsn)
    got: asyncio.Queue[str] = asyncio.Queue()

    def mine(*args: Any) -> None:
        # the channel is the database's: other tests' schemas notify on it too
        if args[3].split("\n")[1:2] == [schema]:
            got.put_nowait(args[3])

    await listener.add_listener(EVENTS_CHANNEL, mine)
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    try:
        request = approval(tool_args={"command": "a\nb\tc"})
        committed = await store.commit(insert(request))
        assert [e.seq for e in committed.events] == [4]
        report = verify_chain(await store.list_audit(), head=await store.audit_head())
        assert report.ok and report.entries == 4
        payload = await asyncio.wait_for(got.get(), 5)
        seq, carried_schema, at, event = payload.split("\n")
        assert (seq, carried_schema) == ("4", schema)
        row = (4, *event.split("\t"))
        assert tables.event_from_row((row[0], row[1], at, row[2])) == committed.events[0]
        async with store._pool.acquire() as conn:
            assert await conn.fetchval("SELECT version FROM schema_version") == SCHEMA_VERSION
    finally:
        await listener.close()
        await store.close()


async def test_events_read_again_are_the_ones_parsed_before(pg: tuple[str, str]) -> None:
    """The newest events are parsed once per process: committed or read, later reads share them."""
    dsn, schema = pg
    a, b = PostgresStore(dsn, schema=schema), PostgresStore(dsn, schema=schema)
    await a.open()
    await b.open()
    try:
        mine = await a.commit(insert(approval()))
        theirs = await b.commit(insert(approval()))
        first = await a.list_events()
        assert [e.seq for e in first] == [1, 2]
        assert first[0] is mine.events[0] and first[1] == theirs.events[0]
        again = await a.list_events(after_seq=0, limit=5)
        assert all(x is y for x, y in zip(again, first, strict=True))
    finally:
        await a.close()
        await b.close()
