"""Both sides of a decision, in process (the service) and over HTTP (``signoff.AsyncClient``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from signoff.backends import Backend, LocalBackend
from signoff.bus.local import LocalBus
from signoff.client import AsyncClient
from signoff.server.app import create_app
from signoff.service import Service, read_text_file
from signoff.store.sqlite import SQLiteStore
from signoff.testing import AGENT, APPROVER
from tests.serving import Server, bearer


@dataclass
class Sides:
    """The agent's backend, a person's backend, and the service underneath both."""

    agent: Backend
    person: Backend
    service: Service
    transport: str


@pytest.fixture(params=["service", "http"])
async def sides(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sides]:
    """An agent and an approver on one SQLite database, in process or through the HTTP API."""
    store = SQLiteStore(tmp_path / "signoff.db")
    await store.open()
    service = Service(store, bus=LocalBus(), read_file=read_text_file)
    if request.param == "service":
        yield Sides(
            LocalBackend(service, AGENT), LocalBackend(service, APPROVER), service, "service"
        )
    else:
        app = create_app(service, sweep=False, heartbeat=0.5)
        agent_token, _ = await service.create_token(AGENT.name, AGENT.role)
        person_token, _ = await service.create_token(APPROVER.name, APPROVER.role)
        transport = httpx.ASGITransport(app=app)
        async with (
            AsyncClient("http://signoff.test", agent_token, transport=transport) as agent,
            AsyncClient("http://signoff.test", person_token, transport=transport) as person,
        ):
            yield Sides(agent, person, service, "http")
    await service.stop_sweeper()
    await store.close()


@pytest.fixture
async def api(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    """The server's HTTP API as the admin (the person deciding)."""
    assert server.admin_token is not None
    async with httpx.AsyncClient(
        base_url=server.base, headers=bearer(server.admin_token), timeout=30
    ) as http:
        yield http
