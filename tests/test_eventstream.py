"""One reader's stream: the log's events once each, in seq order, however the bus orders them."""

from __future__ import annotations

import asyncio

from signoff.bus.local import LocalBus
from signoff.domain.principals import Principal
from signoff.eventstream import follow_events
from signoff.service import Service
from signoff.store.base import Store
from signoff.testing import FakeClock

ADMIN = Principal(name="admin", role="admin")
AGENT = Principal(name="bot", role="agent")


async def test_an_event_that_overtakes_an_earlier_one_sends_the_reader_to_the_log(
    store: Store, clock: FakeClock
) -> None:
    """Seq 3 reaching the bus before 1 and 2 still gives the reader 1, 2, 3, then 4, once each."""
    reading = Service(store, bus=LocalBus(), clock=clock, read_file=None)
    other = Service(store, bus=LocalBus(), clock=clock, read_file=None)  # another server
    stream = follow_events(reading, ADMIN, since=None, session_id="s", heartbeat=30)
    first = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.05)  # the reader is subscribed and waiting live
    for n in range(3):
        await other.submit({"session_id": "s", "tool_name": f"t{n}"}, AGENT)
    logged = await store.list_events()
    assert [e.seq for e in logged] == [1, 2, 3]
    await reading.bus.publish([logged[2]])  # the follower brought the newest one first
    seen = [await asyncio.wait_for(first, 5)]
    seen += [await asyncio.wait_for(anext(stream), 5) for _ in range(2)]
    await reading.bus.publish(logged[:2])  # the older ones arrive late: already read
    await reading.submit({"session_id": "s", "tool_name": "t3"}, AGENT)
    seen.append(await asyncio.wait_for(anext(stream), 5))
    await stream.aclose()
    assert [e.seq if e is not None else None for e in seen] == [1, 2, 3, 4]


async def test_a_session_reader_skips_other_sessions_without_waiting_for_them(
    store: Store, clock: FakeClock
) -> None:
    """Events of other sessions advance the reader's place but are not yielded."""
    service = Service(store, bus=LocalBus(), clock=clock, read_file=None)
    stream = follow_events(service, ADMIN, since=None, session_id="mine", heartbeat=30)
    first = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.05)
    await service.submit({"session_id": "theirs", "tool_name": "a"}, AGENT)
    await service.submit({"session_id": "mine", "tool_name": "b"}, AGENT)
    event = await asyncio.wait_for(first, 5)
    await stream.aclose()
    assert event is not None and event.seq == 2 and event.request.session_id == "mine"
