"""Group commit on PostgreSQL: the writes that come while one is on its way go together."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta

import pytest

from signoff.domain.audit import AuditDraft, verify_chain
from signoff.domain.events import EventDraft
from signoff.domain.requests import ApprovalRequest, Request
from signoff.errors import StoreUnavailable
from signoff.store.base import Committed, DuplicateRequest, GrantsChanged, VersionConflict, Write
from tests.conftest import drop_schema, new_schema, pg_execute, pg_fetchval, postgres_dsn
from tests.store.test_store_suite import T0, approval, insert, shell_grant

pytest.importorskip("asyncpg", reason="needs the postgres extra")

from signoff.store.postgres import PostgresStore

_SLOW = "slow"
"""A request in this session takes its insert 0.3 s (the trigger below): the group behind
it forms while it is on its way."""
_REFUSED = "refused"
"""The database refuses to insert a request in this session (the trigger below)."""
_SLOW_UPDATE = "slow-update"
"""A request in this session takes each update 0.5 s once its row is locked (the trigger
below: a row trigger runs with the row locked)."""


@pytest.fixture
async def store() -> AsyncIterator[PostgresStore]:
    """A store on a fresh schema whose requests table refuses one session and slows another."""
    dsn, schema = await postgres_dsn(), new_schema()
    opened = PostgresStore(dsn, schema=schema)
    await opened.open()
    await pg_execute(
        f"""
        CREATE FUNCTION {schema}.test_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.session_id = '{_REFUSED}' THEN RAISE EXCEPTION 'refused by the test'; END IF;
            IF NEW.session_id = '{_SLOW}' THEN PERFORM pg_sleep(0.3); END IF;
            IF TG_OP = 'UPDATE' AND NEW.session_id = '{_SLOW_UPDATE}' THEN
                PERFORM pg_sleep(0.5);
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER test_trigger BEFORE INSERT OR UPDATE ON {schema}.requests
            FOR EACH ROW EXECUTE FUNCTION {schema}.test_trigger();
        """,
        dsn,
    )
    try:
        yield opened
    finally:
        await opened.close()
        await drop_schema(dsn, schema)


def decided(request: Request, status: str) -> Write:
    """The write moving ``request`` to its next version as ``status`` (a decision)."""
    changed = request.model_copy(update={"status": status, "version": request.version + 1})
    return Write(
        at=T0 + timedelta(seconds=request.version),
        update=changed,
        audit=(AuditDraft(action="decide", actor=status, request_id=request.id),),
        events=(EventDraft(type="decided", request=changed),),
    )


async def started(*writes: Write, store: PostgresStore) -> list[asyncio.Task[Committed]]:
    """Commit the first write (a slow one), then the others, once it is on its way."""
    first = asyncio.create_task(store.commit(writes[0]))
    await asyncio.sleep(0.05)
    rest = [asyncio.create_task(store.commit(w)) for w in writes[1:]]
    await asyncio.sleep(0)  # each has joined the group behind the first
    return [first, *rest]


async def assert_stored(store: PostgresStore, requests: list[ApprovalRequest]) -> None:
    """Each of these requests is stored as it was written."""
    for request in requests:
        assert await store.get_request(request.id) == request


async def only_failed(
    store: PostgresStore,
    results: list[Committed | BaseException],
    at: int,
    failed: Request,
    good: list[ApprovalRequest],
    entries: int,
) -> BaseException:
    """What the write at ``at`` failed with: it stored nothing, every other write committed,
    ``good`` are stored and the log holds ``entries`` entries, whole."""
    outcome = results[at]
    assert isinstance(outcome, BaseException), outcome
    assert all(isinstance(r, Committed) for n, r in enumerate(results) if n != at)
    assert await store.get_request(failed.id) is None
    await assert_stored(store, good)
    await assert_log_whole(store, entries)
    return outcome


async def assert_log_whole(store: PostgresStore, entries: int) -> None:
    """The chain verifies, and audit entries and events are numbered without a gap."""
    audit = await store.list_audit()
    report = verify_chain(audit, head=await store.audit_head())
    assert report.ok and report.entries == entries
    events = await store.list_events()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_waiting_writes_go_as_one_group_and_each_gets_its_own(
    store: PostgresStore,
) -> None:
    """Forty inserts at once: groups form, and each caller is told its own entry and event,
    as the log numbers and chains them."""
    requests = [approval(session_id=_SLOW), *(approval() for _ in range(39))]
    tasks = await started(*(insert(r) for r in requests), store=store)
    results = await asyncio.gather(*tasks)
    assert store.groups >= 1
    for request, committed in zip(requests, results, strict=True):
        assert [e.request.id for e in committed.events] == [request.id]
        assert [a.request_id for a in committed.audit] == [request.id]
    told = {a.seq: (a.request_id, a.hash) for c in results for a in c.audit}
    assert {a.seq: (a.request_id, a.hash) for a in await store.list_audit()} == told
    told_events = {e.seq: e.request.id for c in results for e in c.events}
    assert {e.seq: e.request.id for e in await store.list_events()} == told_events
    await assert_stored(store, requests)
    await assert_log_whole(store, 40)


async def test_a_write_that_clashes_in_a_group_stores_nothing_and_the_rest_commit(
    store: PostgresStore,
) -> None:
    """Two decisions on each of ten requests in one group: one wins each, the other gets
    VersionConflict; a duplicate insert in the same group gets DuplicateRequest."""
    requests = [approval() for _ in range(10)]
    await asyncio.gather(*(store.commit(insert(r)) for r in requests))
    slow, again = approval(session_id=_SLOW), requests[0]
    before = store.groups
    writes = [insert(slow), *(decided(r, s) for r in requests for s in ("approved", "rejected"))]
    tasks = await started(*writes, insert(again), store=store)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert store.groups > before
    assert isinstance(results[0], Committed)
    assert isinstance(results[-1], DuplicateRequest)
    decisions = results[1:-1]
    for n, request in enumerate(requests):
        first, second = decisions[2 * n], decisions[2 * n + 1]
        assert isinstance(first, Committed) and isinstance(second, VersionConflict)
        stored = await store.get_request(request.id)
        assert stored is not None and stored.status == "approved"
    await assert_log_whole(store, 10 + 1 + 10)


async def test_a_write_the_database_refuses_fails_alone(store: PostgresStore) -> None:
    """The database refuses one insert of a group: the group is rolled back and sent again
    one by one, so that write fails (nothing of it stored) and the others commit."""
    good = [approval() for _ in range(6)]
    bad = approval(session_id=_REFUSED)
    writes = [insert(approval(session_id=_SLOW)), *(insert(r) for r in (*good[:3], bad, *good[3:]))]
    tasks = await started(*writes, store=store)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    refused = await only_failed(store, results, 4, bad, good, 7)
    assert isinstance(refused, StoreUnavailable) and "refused by the test" in refused.message


async def test_a_request_decided_against_old_grants_fails_alone_in_its_group(
    store: PostgresStore,
) -> None:
    """In a group of requests decided against the grants, the one that read them before a
    grant was stored fails the group, which is sent again one by one: that one fails with
    GrantsChanged and stores nothing; the others commit."""
    before = await store.grants_for("shell", "agent")
    await store.commit(Write(at=T0, grants=(shell_grant(),)))
    now = await store.grants_for("shell", "agent")
    good = [approval() for _ in range(5)]
    stale = approval()
    writes = [
        replace(insert(approval(session_id=_SLOW)), grants_version=now.version),
        *(replace(insert(r), grants_version=now.version) for r in good[:2]),
        replace(insert(stale), grants_version=before.version),
        *(replace(insert(r), grants_version=now.version) for r in good[2:]),
    ]
    results = await asyncio.gather(*await started(*writes, store=store), return_exceptions=True)
    assert isinstance(await only_failed(store, results, 3, stale, good, 6), GrantsChanged)


async def test_a_grant_stored_while_a_request_waits_for_the_head_refuses_it(
    store: PostgresStore,
) -> None:
    """Another server holds the log head, storing a grant, while a request decided against
    the grants before it waits: the insert reads the grants version once it has the head,
    the one that server committed, and fails with GrantsChanged. Had that server's
    transaction not moved the version, the same wait ends in a commit."""
    import asyncpg

    read = await store.grants_for("shell", "agent")
    other = await asyncpg.connect(store.dsn, server_settings={"search_path": store.schema})
    try:
        for moves, outcome in ((False, Committed), (True, GrantsChanged)):
            transaction = other.transaction()
            await transaction.start()
            await other.execute("SELECT 1 FROM log_head WHERE id = 1 FOR UPDATE")
            if moves:
                await other.execute(
                    "UPDATE log_head SET grants_version = grants_version + 1 WHERE id = 1"
                )
            request = approval()
            waiting = asyncio.create_task(
                store.commit(replace(insert(request), grants_version=read.version))
            )
            await asyncio.sleep(0.3)
            assert not waiting.done()  # behind the other transaction's head
            await transaction.commit()
            result = (await asyncio.gather(waiting, return_exceptions=True))[0]
            assert isinstance(result, outcome), result
            assert (await store.get_request(request.id) is not None) is (outcome is Committed)
    finally:
        await other.close()
    await assert_log_whole(store, 1)


async def test_a_write_cancelled_before_its_group_left_is_never_sent(
    store: PostgresStore,
) -> None:
    """A caller cancelled while its write waits for the one on its way: nothing of it is
    stored; the others in its group commit."""
    kept, dropped = approval(), approval()
    tasks = await started(
        insert(approval(session_id=_SLOW)), insert(dropped), insert(kept), store=store
    )
    tasks[1].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[1], asyncio.CancelledError)
    assert isinstance(results[0], Committed) and isinstance(results[2], Committed)
    assert await store.get_request(dropped.id) is None
    assert await store.get_request(kept.id) == kept
    await assert_log_whole(store, 2)


async def test_a_group_whose_connection_is_cut_fails_whole_and_stores_nothing(
    store: PostgresStore,
) -> None:
    """The connection of a group on its way is terminated: its COMMIT may have been sent,
    so no write of it is tried again; each caller gets StoreUnavailable, and the database
    (which rolled the group back) holds none of them."""
    first, slow, *rest = [approval(session_id=_SLOW), approval(session_id=_SLOW)] + [
        approval() for _ in range(3)
    ]
    tasks = await started(*(insert(r) for r in (first, slow, *rest)), store=store)
    assert isinstance(await tasks[0], Committed)
    dsn = store.dsn
    pid = None
    for _ in range(100):  # the group's insert of `slow` sleeps in the trigger
        pid = await pg_fetchval(
            "SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND pid = ANY($1)",
            dsn,
            list(store._backends),
        )
        if pid is not None:
            break
        await asyncio.sleep(0.02)
    assert pid is not None, "the group never reached the database"
    assert await pg_fetchval("SELECT pg_terminate_backend($1)", dsn, pid)
    results = await asyncio.gather(*tasks[1:], return_exceptions=True)
    assert all(isinstance(r, StoreUnavailable) for r in results), results
    for request in (slow, *rest):
        assert await store.get_request(request.id) is None
    await assert_stored(store, [first])
    await assert_log_whole(store, 1)


async def test_closing_sends_the_writes_already_waiting(store: PostgresStore) -> None:
    """A close while a group waits behind the write on its way: every one of them commits
    before the connections close."""
    requests = [approval(session_id=_SLOW), *(approval() for _ in range(5))]
    tasks = await started(*(insert(r) for r in requests), store=store)
    await store.close()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, Committed) for r in results), results
    await store.open()
    await assert_stored(store, requests)
    await assert_log_whole(store, 6)


async def assert_no_deadlock(dsn: str, before: int) -> None:
    """PostgreSQL's count of deadlocks is still ``before``, for two seconds: a backend
    reports its count once it ends or idles, not at once."""
    for _ in range(20):
        assert await deadlocks(dsn) == before, "PostgreSQL found a deadlock"
        await asyncio.sleep(0.1)


async def deadlocks(dsn: str) -> int:
    """The deadlocks PostgreSQL has found in this database so far."""
    found = await pg_fetchval(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()", dsn
    )
    assert isinstance(found, int)
    return found


async def test_a_group_and_another_servers_write_never_deadlock(store: PostgresStore) -> None:
    """Another server's write holds a request's row while this server's group decides that
    request and another. Every write takes the log head before any request row, so neither
    waits for the other while holding what the other needs: PostgreSQL finds no deadlock
    (it would break one after a second, failing a write or sending a group again alone),
    one decision wins, the other gets VersionConflict."""
    other = PostgresStore(store.dsn, schema=store.schema)
    await other.open()
    held, free = approval(session_id=_SLOW_UPDATE), approval()
    for request in (held, free):
        await store.commit(insert(request))
    before = await deadlocks(store.dsn)
    try:
        lone = asyncio.create_task(other.commit(decided(held, "rejected")))
        await asyncio.sleep(0.1)  # its update holds the row, in the trigger's sleep
        tasks = await started(
            insert(approval(session_id=_SLOW)),
            decided(free, "approved"),
            decided(held, "approved"),
            store=store,
        )
        results = await asyncio.gather(lone, *tasks, return_exceptions=True)
    finally:
        await other.close()
        await store.close()  # their backends end, and report their counts as they do
    assert [type(r) for r in results] == [Committed, Committed, Committed, VersionConflict]
    await assert_no_deadlock(store.dsn, before)
    await store.open()
    stored = await store.get_request(held.id)
    assert stored is not None and stored.status == "rejected"
    await assert_log_whole(store, 2 + 1 + 2)


async def test_three_servers_racing_on_the_same_requests_never_deadlock(
    store: PostgresStore,
) -> None:
    """Three stores on one database (three servers) each decide, then move on, the same
    twelve requests at once, in orders of their own, with a duplicate submit of each among
    them: groups form on each, every request gets one winner per version, and PostgreSQL
    finds no deadlock."""
    others = [PostgresStore(store.dsn, schema=store.schema) for _ in range(2)]
    for other in others:
        await other.open()
    servers = [store, *others]
    requests = [approval() for _ in range(12)]
    await asyncio.gather(*(store.commit(insert(r)) for r in requests))
    before = await deadlocks(store.dsn)
    try:
        for status in ("approved", "rejected"):
            current = [await store.get_request(r.id) for r in requests]
            writes = [
                (server, decided(request, status))
                for n, server in enumerate(servers)
                for request in (current[n:] + current[:n] if n % 2 else current[::-1])
                if request is not None
            ]
            writes += [(servers[n % 3], insert(r)) for n, r in enumerate(requests)]
            results = await asyncio.gather(
                *(server.commit(write) for server, write in writes), return_exceptions=True
            )
            won = [
                w.update.id
                for (_, w), r in zip(writes, results, strict=True)
                if w.update and isinstance(r, Committed)
            ]
            assert sorted(won) == sorted(r.id for r in requests), results
            assert all(
                isinstance(r, (Committed, VersionConflict, DuplicateRequest)) for r in results
            ), results
    finally:
        for other in others:
            await other.close()
        await store.close()
    await assert_no_deadlock(store.dsn, before)
    await store.open()
    await assert_log_whole(store, 12 * 3)
