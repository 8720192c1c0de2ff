"""A service keeps the live grants it read and reads them again only once a write decided
against them is refused: a grant stored or revoked anywhere since is seen at the next
submit, here or on another server sharing the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from signoff.bus.local import LocalBus
from signoff.domain.requests import Request
from signoff.errors import InvalidTransition
from signoff.service import Service
from signoff.store.base import Committed, GrantsChanged, Write
from signoff.store.memory import MemoryStore
from signoff.testing import AGENT, APPROVER
from tests.test_followed_versions import Reads, backend, two_servers

__all__ = ["backend"]  # the fixture, parametrized over the shared stores

ARGS: dict[str, Any] = {"command": "make deploy"}


async def submitted(service: Service, session: str = "s") -> Request:
    """A deploy call submitted by the agent in ``session``."""
    body = {"session_id": session, "tool_name": "deploy", "tool_args": ARGS}
    return (await service.submit(body, AGENT)).request


async def test_grants_changed_on_another_server_are_seen_at_the_next_submit(
    backend: str, tmp_path: Path
) -> None:
    """Here reads the grants once and keeps them: later submits read nothing. A grant
    made there approves the next submit here; once revoked there, the next submit here
    is pending, and each change costs here one refused write and one read."""
    async with two_servers(backend, tmp_path) as (here, there):
        reads = Reads(here.store, "grants_for")
        for _ in range(3):
            assert (await submitted(here)).status == "pending"
        assert reads.count == 1
        first = await submitted(there)
        await there.decide(first.id, {"type": "approve", "scope": "always"}, APPROVER)
        approved = await submitted(here)
        assert approved.status == "approved" and approved.grant_id is not None
        assert reads.count == 2
        assert (await submitted(here, "other session")).status == "approved"
        assert reads.count == 2
        await there.revoke_grant(approved.grant_id, APPROVER)
        assert (await submitted(here)).status == "pending"
        assert reads.count == 3
        report = await here.verify_audit()
        assert report.ok, report


async def test_a_service_reads_the_grants_again_after_storing_one_itself() -> None:
    """A grant this service stores (an approval with a scope, a revoke) drops the grants it
    kept, so its next submit reads them rather than being refused once."""
    store = MemoryStore()
    service = Service(store, bus=LocalBus(), read_file=None)
    reads = Reads(store, "grants_for")
    refused: list[Write] = []
    commit = store.commit

    async def watched(write: Write) -> Committed:
        try:
            return await commit(write)
        except GrantsChanged:
            refused.append(write)
            raise

    store.commit = watched  # type: ignore[method-assign]
    first = await submitted(service)
    await service.decide(first.id, {"type": "approve", "scope": "session"}, APPROVER)
    again = await submitted(service)
    assert again.status == "approved" and again.grant_id is not None
    await service.revoke_grant(again.grant_id, APPROVER)
    assert (await submitted(service)).status == "pending"
    assert reads.count == 3 and refused == []


async def test_grants_that_keep_changing_fail_the_submit_and_store_nothing() -> None:
    """A store that refuses every try for changed grants: the submit gives up with a
    conflict to try again, after reading the grants afresh each time, and stores nothing."""
    store = MemoryStore()
    service = Service(store, bus=LocalBus(), read_file=None)
    reads = Reads(store, "grants_for")

    async def refuse(write: Write) -> Committed:
        raise GrantsChanged()

    store.commit = refuse  # type: ignore[method-assign]
    with pytest.raises(InvalidTransition, match="grants keep changing"):
        await submitted(service)
    assert reads.count > 1
    assert await store.list_events() == [] and await store.list_audit() == []
