"""Two services on one shared store: each starts a change from the version the other's
event carried, without reading it back, and a stale one never wins."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from signoff.bus.local import LocalBus
from signoff.domain.events import Event
from signoff.domain.principals import Principal
from signoff.domain.requests import Request
from signoff.errors import InvalidTransition, RequestNotFound
from signoff.service import Service
from signoff.store.base import Store
from signoff.store.sqlite import SQLiteStore
from signoff.testing import AGENT, APPROVER
from tests.conftest import drop_schema, new_schema, postgres_dsn

ARGS: dict[str, Any] = {"command": "make deploy"}


class Reads:
    """Counts a store's calls of one read, by default of one request (wrapped on the
    instance)."""

    def __init__(self, store: Store, method: str = "get_request") -> None:
        self.count = 0
        read = getattr(store, method)

        async def counted(*args: Any) -> Any:
            self.count += 1
            return await read(*args)

        setattr(store, method, counted)


@contextlib.asynccontextmanager
async def two_servers(backend: str, tmp_path: Path) -> AsyncIterator[tuple[Service, Service]]:
    """Two services, each with its own store on one SQLite file or PostgreSQL schema, each
    following the other's commits."""
    schema: str | None = None
    stores: list[Store]
    if backend == "sqlite":
        stores = [SQLiteStore(tmp_path / "shared.db"), SQLiteStore(tmp_path / "shared.db")]
    else:
        from signoff.store.postgres import PostgresStore

        dsn, schema = await postgres_dsn(), new_schema()
        stores = [PostgresStore(dsn, schema=schema), PostgresStore(dsn, schema=schema)]
    services = [Service(s, bus=LocalBus(), read_file=None, follow=True) for s in stores]
    try:
        async with services[0], services[1]:
            yield services[0], services[1]
    finally:
        if schema is not None:
            await drop_schema(await postgres_dsn(), schema)


async def submitted_and_followed(here: Service, there: Service) -> Request:
    """A request submitted ``here``, once ``there``'s follower has published it (``there``
    listens before the submit, so the event cannot come first)."""
    async with there.bus.subscribe() as seen:
        body = {"session_id": "s", "tool_name": "deploy", "tool_args": ARGS}
        request = (await here.submit(body, AGENT)).request
        while True:
            event = await seen.get(timeout=10)
            assert event is not None, f"{request.id} never followed"
            if event.request.id == request.id:
                return request


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The shared stores."""
    return str(request.param)


async def test_a_followed_version_saves_the_read(backend: str, tmp_path: Path) -> None:
    """Submitted here, decided there, claimed here: neither side reads the request back."""
    async with two_servers(backend, tmp_path) as (here, there):
        reads_here, reads_there = Reads(here.store), Reads(there.store)
        request = await submitted_and_followed(here, there)
        async with here.bus.subscribe(request_id=request.id) as seen_here:
            decided = await there.decide(request.id, {"type": "approve"}, APPROVER)
            assert decided.status == "approved"
            event = await seen_here.get(timeout=10)
        assert event is not None and event.request.version == decided.version
        claimed = await here.claim(request.id, ARGS, AGENT)
        assert claimed.status == "executing" and claimed.version == decided.version + 1
        assert (reads_here.count, reads_there.count) == (0, 0)
        done = await here.complete(request.id, AGENT, result="ok")
        assert done.status == "completed"
        assert (await there.get(request.id)).status == "completed"
        assert (await here.verify_audit()).ok


async def test_a_stale_followed_version_never_wins(backend: str, tmp_path: Path) -> None:
    """There keeps the pending version; here approves while there's follower is stopped.
    There's reject starts from its stale version, is refused on the store's version check,
    and a fresh read refuses it as already decided: the approval stands."""
    async with two_servers(backend, tmp_path) as (here, there):
        request = await submitted_and_followed(here, there)
        follower = there.follower
        assert follower is not None
        await follower.stop()
        await here.decide(request.id, {"type": "approve"}, APPROVER)
        reads = Reads(there.store)
        with pytest.raises(InvalidTransition):
            await there.decide(request.id, {"type": "reject", "reason": "no"}, APPROVER)
        assert reads.count == 1  # the stale start, refused; then one fresh read
        stored = await there.get(request.id)
        assert stored.status == "approved" and stored.decision is not None
        assert stored.decision.decision.type == "approve"
        assert (await there.verify_audit()).ok


async def test_an_older_event_does_not_replace_a_newer_version(tmp_path: Path) -> None:
    """The follower may bring an event of a version this service has since moved past (read
    from the log in the moment before its own commit was published): it is ignored."""
    async with two_servers("sqlite", tmp_path) as (here, there):
        request = await submitted_and_followed(here, there)
        decided = await there.decide(request.id, {"type": "approve"}, APPROVER)
        follower = there.follower
        assert follower is not None
        # the submit's event once more, as the follower would publish it
        old = Event(seq=10_000, type="created", at=request.created_at, request=request)
        await follower._bus.publish([old])
        reads = Reads(there.store)
        claimed = await there.claim(request.id, ARGS, AGENT)
        assert claimed.version == decided.version + 1
        assert reads.count == 0  # claimed from the kept approval: the pending one was ignored


async def test_a_wait_starts_from_the_kept_pending_version_and_wakes_for_a_decision_there(
    backend: str, tmp_path: Path
) -> None:
    """Here waits on a request it holds pending: no read, and there's decision, which the
    follower brings, ends the wait."""
    async with two_servers(backend, tmp_path) as (here, there):
        reads = Reads(here.store)
        request = (await here.submit({"session_id": "s", "tool_name": "deploy"}, AGENT)).request
        waiting = asyncio.create_task(here.wait(request.id, timeout=30, principal=AGENT))
        await asyncio.sleep(0.05)
        assert not waiting.done() and reads.count == 0
        await there.decide(request.id, {"type": "approve"}, APPROVER)
        waited = await asyncio.wait_for(waiting, 10)
        assert waited.status == "approved" and waited.version == request.version + 1
        assert reads.count == 0


async def test_a_wait_reads_a_request_it_may_not_see_or_no_longer_pending(
    backend: str, tmp_path: Path
) -> None:
    """A kept version that is not pending, or another agent's request, is not answered
    from memory: the first is read (an approval is returned at once), the second refused."""
    async with two_servers(backend, tmp_path) as (here, _there):
        request = (await here.submit({"session_id": "s", "tool_name": "deploy"}, AGENT)).request
        with pytest.raises(RequestNotFound):
            await here.wait(request.id, timeout=5, principal=Principal(name="other", role="agent"))
        await here.decide(request.id, {"type": "approve"}, APPROVER)
        reads = Reads(here.store)
        waited = await asyncio.wait_for(here.wait(request.id, timeout=30, principal=AGENT), 10)
        assert waited.status == "approved" and reads.count == 1


async def test_without_a_follower_a_wait_reads_the_shared_store(
    backend: str, tmp_path: Path
) -> None:
    """A service that follows nothing on a store others write reads the request when a wait
    starts: a decision made elsewhere since its own submit ends the wait at once."""
    async with two_servers(backend, tmp_path) as (here, there):
        alone = Service(here.store, bus=LocalBus(), read_file=None, follow=False)
        request = (await alone.submit({"session_id": "s", "tool_name": "deploy"}, AGENT)).request
        await there.decide(request.id, {"type": "approve"}, APPROVER)
        reads = Reads(here.store)
        waited = await asyncio.wait_for(alone.wait(request.id, timeout=30, principal=AGENT), 5)
        assert waited.status == "approved" and reads.count == 1
