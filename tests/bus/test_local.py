"""The in-process bus and the event-log follower that brings in other processes' events."""

from __future__ import annotations

import asyncio
from pathlib import Path

from signoff.bus.follower import EventLogFollower
from signoff.bus.local import LocalBus
from signoff.domain.events import Event
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from signoff.testing import AGENT, APPROVER, memory_service


async def test_subscriptions_filter_by_request_and_session() -> None:
    """A subscriber sees only the requests or sessions it asked for."""
    service = memory_service()
    a = (await service.submit({"session_id": "s1", "tool_name": "t"}, AGENT)).request
    only_a = service.bus.subscribe(request_id=a.id)
    only_s2 = service.bus.subscribe(session_id="s2")
    everything = service.bus.subscribe()
    b = (await service.submit({"session_id": "s2", "tool_name": "t"}, AGENT)).request
    await service.decide(a.id, {"type": "approve"}, APPROVER)
    got_a = [only_a.get_nowait(), only_a.get_nowait()]
    assert [e.request.id if e else None for e in got_a] == [a.id, None]
    first_s2 = only_s2.get_nowait()
    assert first_s2 is not None and first_s2.request.id == b.id
    assert only_s2.get_nowait() is None
    assert everything.get_nowait() is not None and everything.get_nowait() is not None
    for sub in (only_a, only_s2, everything):
        sub.close()
    assert isinstance(service.bus, LocalBus) and service.bus.subscriber_count == 0


async def test_slow_subscriber_is_marked_lagged_not_blocking() -> None:
    """A full subscriber is marked lagged; publishing carries on for everyone else."""
    bus = LocalBus(maxsize=2)
    service = Service(memory_service().store, bus=bus, read_file=None)
    slow = bus.subscribe()
    other = bus.subscribe(session_id="s9")
    for _ in range(3):
        await service.submit({"session_id": "s9", "tool_name": "t"}, AGENT)
    assert slow.lagged and other.lagged
    fresh = bus.subscribe()
    await service.submit({"session_id": "s9", "tool_name": "t"}, AGENT)
    assert fresh.get_nowait() is not None and not fresh.lagged


async def test_a_waiting_get_wakes_on_publish_and_times_out_when_idle() -> None:
    """get() returns the event as soon as it is published, and None once its timeout passes."""
    service = memory_service()
    subscription = service.bus.subscribe()
    assert await subscription.get(timeout=0.01) is None
    waiting = asyncio.create_task(subscription.get(timeout=30))
    await asyncio.sleep(0)
    assert not waiting.done()
    created = (await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
    event = await asyncio.wait_for(waiting, 5)
    assert event is not None and event.request.id == created.id
    cancelled = asyncio.create_task(subscription.get(timeout=30))
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)
    assert await subscription.get(timeout=1) is not None  # a cancelled wait loses nothing
    subscription.close()


async def test_follower_publishes_what_another_process_wrote(tmp_path: Path) -> None:
    """Events committed through a second store on the same file reach this process's bus once."""
    path = tmp_path / "signoff.db"
    here = Service(SQLiteStore(path), read_file=None, follow=False)  # this test's follower
    there = Service(SQLiteStore(path), read_file=None, follow=False)
    async with here, there:
        follower = EventLogFollower(here.store, here.bus, interval=0.01)
        await follower.start()
        subscription = here.bus.subscribe()
        local = (await here.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
        remote = (await there.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
        await there.decide(local.id, {"type": "approve"}, APPROVER)
        assert await follower.poll_once() >= 0
        seen = []
        while (event := await subscription.get(timeout=1)) is not None:
            seen.append((event.type, event.request.id))
            if len(seen) == 3:
                break
        await follower.poll_once()
        assert subscription.get_nowait() is None
        await follower.stop()
        subscription.close()
    assert seen == [("created", local.id), ("created", remote.id), ("decided", local.id)]


async def test_publishing_a_seq_twice_delivers_it_once() -> None:
    """The bus delivers each seq once, whether the service or a follower publishes it first."""
    service = memory_service()
    subscription = service.bus.subscribe()
    await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)
    logged = await service.store.list_events()
    await service.bus.publish(logged)  # a follower that read the commit before it was published
    first = subscription.get_nowait()
    assert first is not None and first.seq == logged[0].seq
    assert subscription.get_nowait() is None
    subscription.close()


async def test_a_service_on_a_shared_file_follows_other_processes_itself(tmp_path: Path) -> None:
    """Service(SQLiteStore(file)) wakes wait() for a decision another process commits."""
    path = tmp_path / "signoff.db"
    async with Service(SQLiteStore(path), read_file=None) as here:
        assert here.follower is not None
        request = (await here.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
        waiting = asyncio.create_task(here.wait(request.id, 30))
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        async with Service(SQLiteStore(path), read_file=None, follow=False) as there:
            await there.decide(request.id, {"type": "approve"}, APPROVER)
            decided_at = loop.time()
        decided = await asyncio.wait_for(waiting, 5)
        assert decided.status == "approved"
        assert loop.time() - decided_at < 1.0  # tailed every 0.2 s, not the 30 s timeout


async def test_a_following_service_delivers_its_own_events_once(tmp_path: Path) -> None:
    """While its follower tails the log, each of the service's own commits arrives once."""
    async with Service(SQLiteStore(tmp_path / "signoff.db"), read_file=None) as service:
        assert service.follower is not None
        subscription = service.bus.subscribe()
        made = [
            (await service.submit({"session_id": "s", "tool_name": f"t{n}"}, AGENT)).request
            for n in range(5)
        ]
        for request in made:
            await service.decide(request.id, {"type": "reject", "reason": "no"}, APPROVER)
        await asyncio.sleep(0.5)  # at least two polls of the follower
        seen = []
        while (event := subscription.get_nowait()) is not None:
            seen.append(event.seq)
        subscription.close()
    assert seen == sorted(set(seen)) and len(seen) == 10


async def test_following_is_automatic_only_for_shared_stores_and_ends_on_close(
    tmp_path: Path,
) -> None:
    """Memory stores and follow=False have no follower; close() stops the one a file starts."""
    memory = memory_service()
    await memory.open()
    assert memory.follower is None
    await memory.close()
    async with Service(SQLiteStore(tmp_path / "off.db"), follow=False) as off:
        assert off.follower is None
    service = Service(SQLiteStore(tmp_path / "on.db"))
    await service.open()
    await service.open()  # opening again starts no second follower
    assert service.follower is not None
    following = [t for t in asyncio.all_tasks() if t.get_name() == "signoff-event-follower"]
    assert len(following) == 1
    await service.close()
    assert service.follower is None
    assert following[0].done()


async def test_each_subscription_gets_exactly_its_events() -> None:
    """Filtered by request, by session, by both (matching or not) and by nothing: each
    subscription gets exactly the events its filters pass, in order, and no other."""
    service = memory_service()
    bus = service.bus
    a = (await service.submit({"session_id": "s1", "tool_name": "t"}, AGENT)).request
    b = (await service.submit({"session_id": "s1", "tool_name": "t"}, AGENT)).request
    c = (await service.submit({"session_id": "s2", "tool_name": "t"}, AGENT)).request
    subscriptions = {
        "request a": bus.subscribe(request_id=a.id),
        "session s1": bus.subscribe(session_id="s1"),
        "a in s1": bus.subscribe(request_id=a.id, session_id="s1"),
        "a in s2": bus.subscribe(request_id=a.id, session_id="s2"),
        "c in s2": bus.subscribe(request_id=c.id, session_id="s2"),
        "everything": bus.subscribe(),
    }
    for request in (a, b, c):
        await service.decide(request.id, {"type": "approve"}, APPROVER)
    got: dict[str, list[str]] = {}
    for name, subscription in subscriptions.items():
        got[name] = []
        while (event := subscription.get_nowait()) is not None:
            got[name].append(event.request.id)
        subscription.close()
    assert got == {
        "request a": [a.id],
        "session s1": [a.id, b.id],
        "a in s1": [a.id],
        "a in s2": [],
        "c in s2": [c.id],
        "everything": [a.id, b.id, c.id],
    }
    assert isinstance(bus, LocalBus) and bus.subscriber_count == 0


async def test_publishing_costs_the_same_with_ten_thousand_waiters_on_other_requests() -> None:
    """An event is offered to its own request's subscriptions, its session's and the
    unfiltered ones, never to the subscriptions of the 10,000 other requests waited on."""
    service = memory_service()
    bus = service.bus
    assert isinstance(bus, LocalBus)

    async def offers_for_one_decision(waiters: int) -> int:
        others = [bus.subscribe(request_id=f"req_other{n}") for n in range(waiters)]
        mine = (await service.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
        waiting = bus.subscribe(request_id=mine.id)
        before = bus.offers
        await service.decide(mine.id, {"type": "approve"}, APPROVER)
        offered = bus.offers - before
        decided = waiting.get_nowait()
        assert decided is not None and decided.type == "decided"
        for subscription in [*others, waiting]:
            subscription.close()
        return offered

    assert await offers_for_one_decision(1) == await offers_for_one_decision(10_000) == 1
    assert bus.subscriber_count == 0


async def test_follower_reads_the_log_once_when_the_page_is_short(tmp_path: Path) -> None:
    """A poll that finds fewer events than a page has reached the end of the log: it reads
    no second, empty page (one query per poll, not two, for a server following others)."""
    path = tmp_path / "signoff.db"
    here = Service(SQLiteStore(path), read_file=None, follow=False)
    there = Service(SQLiteStore(path), read_file=None, follow=False)
    async with here, there:
        reads: list[int] = []
        list_events = here.store.list_events

        async def counted(*, after_seq: int, limit: int) -> list[Event]:
            found = await list_events(after_seq=after_seq, limit=limit)
            reads.append(len(found))
            return found

        here.store.list_events = counted  # type: ignore[method-assign,assignment]
        follower = EventLogFollower(here.store, here.bus, interval=60)  # polled by hand
        subscription = here.bus.subscribe()
        await there.submit({"session_id": "s", "tool_name": "t"}, AGENT)
        assert await follower.poll_once() == 1
        assert reads == [1]
        assert await subscription.get(timeout=1) is not None
        assert await follower.poll_once() == 0  # nothing new: one empty read
        assert reads == [1, 0]


async def test_the_follower_does_not_read_back_what_this_process_published(
    tmp_path: Path,
) -> None:
    """This process's own commits, on its bus already, are not read from the log again: the
    read starts after them, and another process's event written between two of them is
    read and published once."""
    path = tmp_path / "signoff.db"
    here = Service(SQLiteStore(path), read_file=None, follow=False)
    there = Service(SQLiteStore(path), read_file=None, follow=False)
    async with here, there:
        reads: list[tuple[int, list[int]]] = []
        list_events = here.store.list_events

        async def counted(*, after_seq: int, limit: int) -> list[Event]:
            found = await list_events(after_seq=after_seq, limit=limit)
            reads.append((after_seq, [e.seq for e in found]))
            return found

        here.store.list_events = counted  # type: ignore[method-assign,assignment]
        follower = EventLogFollower(here.store, here.bus, interval=60)  # polled by hand
        for _ in range(3):  # seqs 1-3, published here as they were committed
            await here.submit({"session_id": "s", "tool_name": "t"}, AGENT)
        assert await follower.poll_once() == 0
        assert reads == [(3, [])]
        subscription = here.bus.subscribe()
        await there.submit({"session_id": "s", "tool_name": "t"}, AGENT)  # seq 4, not here
        await here.submit({"session_id": "s", "tool_name": "t"}, AGENT)  # seq 5
        assert await follower.poll_once() == 1
        assert reads[1:] == [(3, [4, 5])]  # 4 is read, and 5 with it (a page is read whole)
        event = await subscription.get(timeout=1)
        assert event is not None and event.seq == 5  # published by its own commit, first
        event = await subscription.get(timeout=1)
        assert event is not None and event.seq == 4
        assert await follower.poll_once() == 0
        assert reads[2:] == [(5, [])]
        subscription.close()
