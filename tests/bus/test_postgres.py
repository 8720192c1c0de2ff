"""Events across processes on PostgreSQL: NOTIFY wakes, the log catches up, reconnects heal."""

from __future__ import annotations

import asyncio

from signoff.bus.local import LocalBus
from signoff.config import follower_for
from signoff.service import Service
from signoff.testing import AGENT, APPROVER
from tests.conftest import pg_execute


async def node(dsn: str, *, follow: bool | None = None) -> Service:
    """One server's service on the shared database, with its own bus."""
    from signoff.store.postgres import PostgresStore

    service = Service(PostgresStore(dsn), bus=LocalBus(), read_file=None, follow=follow)
    await service.open()
    return service


async def test_wait_on_one_node_wakes_when_another_decides(pg_database: str) -> None:
    """A decision committed by node B wakes a wait() on node A within moments, via NOTIFY.

    Node A is a plain in-process Service: it LISTENs by itself, as it does on a SQLite file.
    """
    from signoff.bus.postgres import PostgresEventFollower

    a, b = await node(pg_database), await node(pg_database, follow=False)
    assert isinstance(a.follower, PostgresEventFollower)
    try:
        request = (await a.submit({"session_id": "s", "tool_name": "t"}, AGENT)).request
        waiting = asyncio.create_task(a.wait(request.id, 20))
        await asyncio.sleep(0.1)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await b.decide(request.id, {"type": "approve"}, APPROVER)
        decided = await asyncio.wait_for(waiting, 10)
        assert decided.status == "approved"
        # woken by the notification, well before the 2 s safety poll would have
        assert loop.time() - started < 1.5
    finally:
        await a.close()
        await b.close()


async def test_a_killed_listening_connection_reconnects_and_misses_nothing(
    pg_database: str,
) -> None:
    """pg_terminate_backend on the LISTEN connection: it reconnects and catches up from the log."""
    a, b = await node(pg_database, follow=False), await node(pg_database, follow=False)
    follower = follower_for(a.store, a.bus)
    await follower.start()
    subscription = a.bus.subscribe()
    try:
        await asyncio.sleep(0.3)
        await pg_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'signoff-follower' "
            f"AND datname = '{pg_database.rsplit('/', 1)[1]}'"
        )
        made = [
            (await b.submit({"session_id": "s", "tool_name": f"t{n}"}, AGENT)).request.id
            for n in range(5)
        ]
        seen: list[str] = []
        while len(seen) < 5:
            event = await subscription.get(timeout=10)
            assert event is not None, f"only {len(seen)} of 5 events arrived"
            seen.append(event.request.id)
        assert seen == made
        assert getattr(follower, "reconnects", 0) >= 1
    finally:
        subscription.close()
        await follower.stop()
        await a.close()
        await b.close()
