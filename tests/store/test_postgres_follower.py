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

from signoff.bus.postgres import HELLO, PostgresEventFollower
from signoff.store.postgres import EVENTS_CHANNEL, PostgresStore


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
        self.read = asyncio.Event()

    async def list_events(self, *, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        events = await super().list_events(after_seq=after_seq, limit=limit)
        self.reads += 1
        self.read.set()
        return events


@contextlib.asynccontextmanager
async def following(dsn: str, schema: str | None = None) -> AsyncIterator[Following]:
    """A store and bus of their own with a LISTEN follower on them, listening already."""
    store = CountingStore(dsn, schema=schema)
    await store.open()
    bus = LocalBus()
    follower = PostgresEventFollower(  # no interval poll during the test: NOTIFYs only
        store.dsn,
        store,
        bus,
        poll=600,
        own_backend=store.is_own_backend,
        parse=store.carried_events,
        schema=schema,
    )
    await follower.start()
    try:
        await asyncio.wait_for(store.read.wait(), 10)  # its first read, once it LISTENs
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


async def test_own_commits_that_never_reach_the_bus_are_read_and_published(
    pg_database: str,
) -> None:
    """Commits of this process's own connections whose events nobody here published (as
    when a caller is cancelled between commit and publish) are read from the log after the
    follower's grace (from what their NOTIFYs carried), and published once each, in order;
    one published here is neither published again nor read."""
    async with following(pg_database) as here:
        writes = [insert(approval()) for _ in range(3)]
        for write in writes[:2]:
            await here.store.commit(write)
        events = await arrived(here.seen, 2)
        reads = here.store.reads
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
    )
    await own.start()
    try:
        await until(lambda: not store._carry, "told it is alone")
        yield store
    finally:
        await own.stop()
        await store.close()


async def test_events_ride_in_the_notify_only_while_another_follower_listens(
    pg_database: str,
) -> None:
    """A server alone on its database sends the seq alone (its own follower needs no
    more); once another follower listens, its NOTIFYs carry the events, which that
    follower publishes with no read; once it has gone, the seq alone again."""
    async with counting(pg_database, poll=0.1) as store, payloads(pg_database) as got:
        await store.commit(insert(approval()))
        assert await asyncio.wait_for(got.get(), 5) == "1"
        async with following(pg_database) as here:
            await until(lambda: store._carry, "told another follower listens")
            committed = await store.commit(insert(approval()))
            payload = await asyncio.wait_for(got.get(), 5)
            assert payload.split("\n")[0] == "2" and len(payload.split("\n")) == 4
            (event,) = await arrived(here.seen, 1)
            assert event == committed.events[0] and here.store.reads == 0
        await until(lambda: not store._carry, "told the other follower has gone")
        await store.commit(insert(approval()))
        assert await asyncio.wait_for(got.get(), 5) == "3"


async def test_a_follower_not_yet_counted_reads_what_the_notify_did_not_carry(
    pg_database: str,
) -> None:
    """Commits made while their server believed no other follower listened (one started
    since its last count) reach that follower all the same, in order, read from the log."""
    async with another_server(pg_database) as elsewhere, following(pg_database) as here:
        assert isinstance(elsewhere.store, PostgresStore)
        elsewhere.store.others_follow(False)  # its count was taken before `here` came
        made = [
            (await elsewhere.submit({"session_id": "s", "tool_name": f"t{n}"}, AGENT)).request
            for n in range(3)
        ]
        events = await arrived(here.seen, 3)
        assert here.store.reads >= 1
        await asyncio.sleep(0.2)
        assert here.seen.get_nowait() is None  # each once
    assert [e.request.id for e in events] == [r.id for r in made]
    assert events == await logged(pg_database, 0)


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
