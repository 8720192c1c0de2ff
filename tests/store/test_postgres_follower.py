"""The PostgreSQL follower: no read for its own commits, nor for others' their NOTIFY carries."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from signoff.bus.local import LocalBus, Subscription
from signoff.domain.events import Event
from signoff.service import Service
from signoff.testing import AGENT, APPROVER
from tests.store.test_store_suite import approval, insert
from tests.test_stop_while_woken import stops

pytest.importorskip("asyncpg", reason="needs the postgres extra")

import asyncpg

from signoff.bus import postgres as postgres_bus
from signoff.bus.postgres import HELLO, PostgresEventFollower
from signoff.store import postgres as postgres_store
from signoff.store.postgres import EVENTS_CHANNEL, PostgresStore
from signoff.store.postgres_migrations import MIGRATIONS, SCHEMA_VERSION


async def test_a_servers_own_commits_are_not_read_back_but_anothers_are(
    pg_database: str,
) -> None:
    """A NOTIFY of its own commit sends no query; another server's is published from it."""
    store = PostgresStore(pg_database, min_size=1, max_size=1)
    here = Service(store, bus=LocalBus(), read_file=None)
    elsewhere = Service(PostgresStore(pg_database), bus=LocalBus(), read_file=None, follow=False)
    await here.open()
    await elsewhere.open()
    sent: list[str] = []
    try:
        async with store._pool.acquire() as conn:  # the pool's one connection
            conn.add_query_logger(lambda record: sent.append(record.query))
        for n in range(5):
            request = (await here.submit({"session_id": "s", "tool_name": f"t{n}"}, AGENT)).request
            await here.decide(request.id, {"type": "approve"}, APPROVER)
        await asyncio.sleep(0.3)  # NOTIFYs of all ten commits have come and gone
        reads = [query for query in sent if "FROM events" in query]
        assert len(reads) <= 2, reads  # the follower's first poll, from seq 0 at its start
        async with here.bus.subscribe() as seen:
            foreign = (await elsewhere.submit({"session_id": "s", "tool_name": "x"}, AGENT)).request
            event = await seen.get(timeout=10)
        assert event is not None and event.request.id == foreign.id and event.seq == 11
        assert len([query for query in sent if "FROM events" in query]) == len(reads)
    finally:
        await elsewhere.close()
        await here.close()


class CountingStore(PostgresStore):
    """The real store, counting its reads of the event log once each has returned (a read
    counted as it starts could return after the count was reset, holding what came since)."""

    def __init__(self, dsn: str, *, schema: str | None = None) -> None:
        super().__init__(dsn, schema=schema)
        self.reads = 0

    async def list_events(self, *, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        events = await super().list_events(after_seq=after_seq, limit=limit)
        self.reads += 1
        return events


@contextlib.asynccontextmanager
async def following(
    dsn: str,
    schema: str | None = None,
    *,
    poll: float = 600,
    alone: bool = False,
    reads: int = 2,
) -> AsyncIterator[Following]:
    """A store and bus of their own with a LISTEN follower on them, listening already and
    past ``reads`` reads of the log (its first, once it LISTENs, and the one a moment after
    its hello); by default no interval poll during the test: NOTIFYs only. ``alone``: wired
    as a server's, its store telling it of its commits and NOTIFYing only while it counts
    another follower."""
    store = CountingStore(dsn, schema=schema)
    await store.open()
    bus = LocalBus()
    follower = PostgresEventFollower(
        store.dsn,
        store,
        bus,
        poll=poll,
        own_backend=store.is_own_backend,
        parse=store.carried_events,
        schema=schema,
        others_follow=store.others_follow if alone else None,
        commits_here=store.tell_commits if alone else None,
    )
    await follower.start()
    try:
        await until(lambda: store.reads >= reads, "read the log on starting")
        store.reads = 0
        async with bus.subscribe() as seen:
            yield Following(store=store, bus=bus, seen=seen)
    finally:
        await follower.stop()
        await store.close()


@dataclass(frozen=True, kw_only=True)
class Following:
    """What :func:`following` gives a test."""

    store: CountingStore
    """The follower's store."""
    bus: LocalBus
    """The bus the follower publishes on (a service publishes its own commits there)."""
    seen: Subscription
    """Every event published on the follower's bus."""


async def arrived(seen: Subscription, count: int) -> list[Event]:
    """The next ``count`` events published, failing if they do not come."""
    events: list[Event] = []
    while len(events) < count:
        event = await seen.get(timeout=10)
        assert event is not None, f"only {len(events)} of {count} events arrived"
        events.append(event)
    return events


async def logged(dsn: str, after_seq: int, schema: str | None = None) -> list[Event]:
    """The events after ``after_seq`` as a store that never saw them reads them."""
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    try:
        return await store.list_events(after_seq=after_seq)
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def another_server(dsn: str, schema: str | None = None) -> AsyncIterator[Service]:
    """A service of its own on the database, writing as another server would (it follows
    nothing); closed on the way out."""
    service = Service(
        PostgresStore(dsn, schema=schema), bus=LocalBus(), read_file=None, follow=False
    )
    await service.open()
    try:
        yield service
    finally:
        await service.close()


async def test_another_servers_events_come_in_their_notify_with_no_read(pg_database: str) -> None:
    """Events that fit in the NOTIFY reach the bus in order, equal to the log's, with no read."""
    async with another_server(pg_database) as elsewhere:
        async with following(pg_database) as here:
            for n in range(5):
                args = {"command": f"line\none\ttab {n}", "why": "a\r\nb\\n\\t\u2028"}
                request = (
                    await elsewhere.submit(
                        {"session_id": "s", "tool_name": "t", "tool_args": args}, AGENT
                    )
                ).request
                await elsewhere.decide(request.id, {"type": "approve"}, APPROVER)
            events = await arrived(here.seen, 10)
            assert here.store.reads == 0
        assert [e.seq for e in events] == list(range(1, 11))
        assert events == await logged(pg_database, 0)
        assert events[0].request.tool_args == {  # type: ignore[union-attr]
            "command": "line\none\ttab 0",
            "why": "a\r\nb\\n\\t\u2028",
        }


async def test_events_too_big_to_carry_are_read_in_order(pg_database: str) -> None:
    """A NOTIFY too big for its events holds the seq alone: small, big, small arrive in order."""
    async with another_server(pg_database) as elsewhere:
        async with following(pg_database) as here:
            for size in (10, 20_000, 10, 10, 9_000, 20_000, 10):
                args = {"blob": "x" * size}
                await elsewhere.submit(
                    {"session_id": "s", "tool_name": "t", "tool_args": args}, AGENT
                )
            events = await arrived(here.seen, 7)
            assert here.store.reads >= 1  # the big ones were read
            await asyncio.sleep(0.2)
            assert here.seen.get_nowait() is None  # and nothing came twice
        assert [e.seq for e in events] == list(range(1, 8))
        assert events == await logged(pg_database, 0)


async def test_a_notify_from_another_schemas_log_is_not_taken_for_this_ones(
    pg_database: str,
) -> None:
    """Two schemas share the channel: another's NOTIFY carries its events, not this log's."""
    async with (
        another_server(pg_database, schema="other") as other,
        another_server(pg_database, schema="mine") as mine,
    ):
        async with following(pg_database, schema="mine") as here:
            for n in range(3):  # seqs 1, 2, 3 in the other log: no event of this one
                await other.submit({"session_id": "s", "tool_name": f"other{n}"}, AGENT)
            await asyncio.sleep(0.2)
            assert here.seen.get_nowait() is None
            made = [
                (await mine.submit({"session_id": "s", "tool_name": f"mine{n}"}, AGENT)).request
                for n in range(3)
            ]
            events = await arrived(here.seen, 3)
        assert [e.request.id for e in events] == [r.id for r in made]
        assert events == await logged(pg_database, 0, schema="mine")


async def test_a_follower_woken_as_it_is_stopped_stops(pg_database: str) -> None:
    """A NOTIFY waking the follower in the same turn as its stop does not keep it running.

    Python 3.11's ``wait_for`` swallowed such a cancel: the service's close hung for ever
    in about half the runs of ``bench/pause_resume.py``, on its last commit's NOTIFY.
    """
    store = PostgresStore(pg_database)
    await store.open()
    follower = PostgresEventFollower(store.dsn, store, LocalBus(), poll=600)
    try:
        await follower.start()
        await asyncio.sleep(0.3)  # listening, and waiting for a NOTIFY
        follower._wake.set()  # what a NOTIFY does, in the same turn as the stop
        assert follower._task is not None
        await stops(follower.stop, [follower._task])
    finally:
        await store.close()


@pytest.mark.parametrize("alone", [False, True], ids=["notified", "alone"])
async def test_own_commits_that_never_reach_the_bus_are_read_and_published(
    pg_database: str, alone: bool
) -> None:
    """Commits of this process's own whose events nobody here published (as when a caller
    is cancelled between commit and publish) are read from the log after the follower's
    grace, and published once each, in order; one published here is neither published
    again nor read. The follower hears of them from their NOTIFYs, or, alone on its
    database (no NOTIFY at all), from its store."""
    async with following(pg_database, alone=alone) as here:
        if alone:
            await until(lambda: not here.store._carry, "told it is alone")
        writes = [insert(approval()) for _ in range(3)]
        for write in writes[:2]:
            await here.store.commit(write)
        events = await arrived(here.seen, 2)
        reads = here.store.reads
        assert reads >= 1 or not alone  # alone, no NOTIFY carried them: they were read
        committed = await here.store.commit(writes[2])
        await here.bus.publish(committed.events)  # published here, as a service does
        (published,) = await arrived(here.seen, 1)
        await asyncio.sleep(0.3)  # past the grace: the follower had no need to read
        assert here.store.reads == reads and here.seen.get_nowait() is None
    assert [e.seq for e in [*events, published]] == [1, 2, 3]
    assert [e.request.id for e in events] == [w.insert.id for w in writes[:2] if w.insert]


async def until(check: Callable[[], bool], what: str) -> None:
    """Wait up to 10 s for ``check()``."""
    deadline = asyncio.get_running_loop().time() + 10
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"never {what}"
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def payloads(dsn: str) -> AsyncIterator[asyncio.Queue[str]]:
    """Every commit's NOTIFY payload on the events channel (not a follower's hello), from a
    plain listening connection (not a follower: the followers do not count it)."""
    listener = await asyncpg.connect(dsn)
    got: asyncio.Queue[str] = asyncio.Queue()

    def heard(*args: Any) -> None:
        if args[3] != HELLO:
            got.put_nowait(args[3])

    await listener.add_listener(EVENTS_CHANNEL, heard)
    try:
        yield got
    finally:
        await listener.close()


@contextlib.asynccontextmanager
async def counting(dsn: str, poll: float) -> AsyncIterator[PostgresStore]:
    """A server's store whose own follower counts the others on connecting, every ``poll``
    seconds and on a hello, and tells the store; once it has counted itself alone."""
    store = PostgresStore(dsn)
    await store.open()
    own = PostgresEventFollower(
        store.dsn,
        store,
        LocalBus(),
        poll=poll,
        own_backend=store.is_own_backend,
        parse=store.carried_events,
        others_follow=store.others_follow,
        commits_here=store.tell_commits,
    )
    await own.start()
    try:
        await until(lambda: not store._carry, "told it is alone")
        yield store
    finally:
        await own.stop()
        await store.close()


async def nothing_notified(dsn: str, got: asyncio.Queue[str]) -> None:
    """That no commit NOTIFYed ``got``'s listener before now: a NOTIFY sent now reaches it
    after any that a commit already made (a listener gets them in commit order) and first."""
    marker = await asyncpg.connect(dsn)
    try:
        await marker.execute(f"NOTIFY {EVENTS_CHANNEL}, 'marker'")
    finally:
        await marker.close()
    assert await asyncio.wait_for(got.get(), 5) == "marker"


async def test_a_server_notifies_only_while_another_follower_listens(pg_database: str) -> None:
    """A server alone on its database NOTIFYs nobody (its own follower hears of its commits
    from its store); once another follower listens, its NOTIFYs carry the events, which
    that follower publishes with no read; once it has gone, no NOTIFY again."""
    async with counting(pg_database, poll=0.1) as store, payloads(pg_database) as got:
        await store.commit(insert(approval()))
        await nothing_notified(pg_database, got)
        async with following(pg_database) as here:
            await until(lambda: store._carry, "told another follower listens")
            committed = await store.commit(insert(approval()))
            payload = await asyncio.wait_for(got.get(), 5)
            assert payload.split("\n")[0] == "2" and len(payload.split("\n")) == 4
            (event,) = await arrived(here.seen, 1)
            assert event == committed.events[0] and here.store.reads == 0
        await until(lambda: not store._carry, "told the other follower has gone")
        await store.commit(insert(approval()))
        await nothing_notified(pg_database, got)


async def test_a_follower_not_yet_counted_reads_what_was_notified_to_nobody(
    pg_database: str,
) -> None:
    """Commits made while their server believed no other follower listened (one started
    since its last count) NOTIFY nobody; they reach that follower all the same at its
    interval's poll, in order, each once, read from the log."""
    async with (
        another_server(pg_database) as elsewhere,
        following(pg_database, poll=0.3) as here,
    ):
        assert isinstance(elsewhere.store, PostgresStore)
        elsewhere.store.others_follow(False)  # its count was taken before `here` came
        made = [
            (await elsewhere.submit({"session_id": "s", "tool_name": f"t{n}"}, AGENT)).request
            for n in range(3)
        ]
        events = await arrived(here.seen, 3)
        assert here.store.reads >= 1
        await asyncio.sleep(0.7)
        assert here.seen.get_nowait() is None  # each once
    assert [e.request.id for e in events] == [r.id for r in made]
    assert events == await logged(pg_database, 0)


async def test_a_follower_reads_the_log_again_once_the_others_have_counted_it(
    pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a server commits between another follower's start and its count of it
    NOTIFYs nobody: that follower reads the log once more a moment after its hello, with
    no interval poll, and publishes those commits, in order, each once."""
    monkeypatch.setattr(postgres_bus, "_COUNTED", 1.5)
    async with (
        another_server(pg_database) as elsewhere,
        following(pg_database, reads=1) as here,  # its first read only
    ):
        assert isinstance(elsewhere.store, PostgresStore)
        elsewhere.store.others_follow(False)  # it has not yet counted the newcomer
        made = [
            (await elsewhere.submit({"session_id": "s", "tool_name": f"t{n}"}, AGENT)).request
            for n in range(3)
        ]
        assert here.seen.get_nowait() is None  # no NOTIFY: nothing yet
        events = await arrived(here.seen, 3)
        assert here.store.reads == 1
        await asyncio.sleep(0.2)
        assert here.seen.get_nowait() is None
    assert [e.request.id for e in events] == [r.id for r in made]


async def test_a_write_cut_short_has_the_follower_read_the_log(pg_database: str) -> None:
    """A write cancelled after its statement was sent may have committed, unseen by its
    caller: its store tells the follower, which reads the log at once and publishes
    whatever it finds there, once."""
    async with following(pg_database, alone=True) as here:
        await until(lambda: not here.store._carry, "told it is alone")
        blocker = await asyncpg.connect(pg_database)
        try:
            async with blocker.transaction():  # every append waits for the head
                await blocker.execute("SELECT * FROM log_head WHERE id = 1 FOR UPDATE")
                cut = asyncio.create_task(here.store.commit(insert(approval())))
                await asyncio.sleep(0.3)  # its statement is on its way, waiting
                reads = here.store.reads
                cut.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await cut
                await until(lambda: here.store.reads > reads, "read the log")
        finally:
            await blocker.close()
        # a commit that NOTIFYs nobody and that the store does not tell of, as one whose
        # answer was lost: the follower finds it when told that one may have been made
        unseen = PostgresStore(pg_database)
        await unseen.open()
        try:
            unseen.others_follow(False)
            committed = await unseen.commit(insert(approval()))
        finally:
            await unseen.close()
        await asyncio.sleep(0.2)
        assert here.seen.get_nowait() is None
        heard = here.store._heard
        assert heard is not None
        heard(None)
        (event,) = await arrived(here.seen, 1)
        assert event == committed.events[0]
        await asyncio.sleep(0.2)
        assert here.seen.get_nowait() is None


async def test_a_follower_that_starts_is_counted_at_once_by_the_others(
    pg_database: str,
) -> None:
    """A follower that starts NOTIFYs its hello: a server already running, whose next count
    is far off, counts the followers at once and carries its events for the new one, which
    publishes them with no read of the log."""
    # no count but the one on connecting, and those a hello asks for
    async with counting(pg_database, poll=600) as store, following(pg_database) as here:
        await until(lambda: store._carry, "told of the follower that started")
        committed = await store.commit(insert(approval()))
        (event,) = await arrived(here.seen, 1)
        assert event == committed.events[0] and here.store.reads == 0


async def test_events_carried_past_an_own_commit_that_notified_nobody_need_no_read(
    pg_database: str,
) -> None:
    """Alone, a server's own commit NOTIFYs nobody; a commit of a process with no follower
    (a CLI) right after it NOTIFYs its events: the follower publishes them from the NOTIFY
    with no read, the commit of its own being on its bus already."""
    async with another_server(pg_database) as cli, following(pg_database, alone=True) as here:
        await until(lambda: not here.store._carry, "told it is alone")
        for n in range(5):
            committed = await here.store.commit(insert(approval()))
            await here.bus.publish(committed.events)  # published here, as a service does
            foreign = (await cli.submit({"session_id": "s", "tool_name": f"t{n}"}, AGENT)).request
            own, carried = await arrived(here.seen, 2)
            assert own == committed.events[0] and carried.request.id == foreign.id
        await asyncio.sleep(0.1)
        assert here.store.reads == 0


async def test_a_version_9_database_upgrades_to_notify_only_while_others_listen(
    pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written at version 9 (a NOTIFY for every commit), upgraded: a store told that no
    other follower listens NOTIFYs nothing; told that one does, it sends the events."""
    monkeypatch.setattr(postgres_store, "MIGRATIONS", MIGRATIONS[:9])
    monkeypatch.setattr(postgres_store, "SCHEMA_VERSION", 9)
    old = PostgresStore(pg_database)
    await old.open()
    try:
        old.others_follow(False)
        await old.commit(insert(approval()))
    finally:
        await old.close()
    monkeypatch.undo()
    async with payloads(pg_database) as got:
        store = PostgresStore(pg_database)
        await store.open()
        try:
            store.others_follow(False)
            await store.commit(insert(approval()))
            await nothing_notified(pg_database, got)
            store.others_follow(True)
            await store.commit(insert(approval()))
            assert (await asyncio.wait_for(got.get(), 5)).split("\n")[0] == "3"
            async with store._pool.acquire() as conn:
                version = await conn.fetchval("SELECT version FROM schema_version")
            assert version == SCHEMA_VERSION == 10
        finally:
            await store.close()
