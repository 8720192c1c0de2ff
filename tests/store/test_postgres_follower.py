"""The PostgreSQL follower reads the log for other servers' commits only, never its own."""

from __future__ import annotations

import asyncio

import pytest

from signoff.bus.local import LocalBus
from signoff.service import Service
from signoff.testing import AGENT, APPROVER

pytest.importorskip("asyncpg", reason="needs the postgres extra")

from signoff.store.postgres import PostgresStore


async def test_a_servers_own_commits_are_not_read_back_but_anothers_are(
    pg_database: str,
) -> None:
    """A NOTIFY of its own commit sends no query; another server's is read and published."""
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
        assert [query for query in sent if "FROM events" in query]
    finally:
        await elsewhere.close()
        await here.close()
