"""Fixtures for the HTTP API: an app over each store backend and clients with each role."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from signoff.domain.principals import Role
from signoff.server.app import create_app
from signoff.service import Service

MakeClient = Callable[[str, Role], Awaitable[httpx.AsyncClient]]


@pytest.fixture
async def make_client(service: Service) -> AsyncIterator[MakeClient]:
    """Makes in-process clients (httpx ASGITransport) holding a fresh token of a role."""
    app = create_app(service, sweep=False, heartbeat=0.2)
    clients: list[httpx.AsyncClient] = []

    async def make(name: str, role: Role) -> httpx.AsyncClient:
        token, _ = await service.create_token(name, role)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://signoff.test",
            headers={"Authorization": f"Bearer {token}"},
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


@pytest.fixture
async def agent(make_client: MakeClient) -> httpx.AsyncClient:
    """A client authenticated as the agent ``bot``."""
    return await make_client("bot", "agent")


@pytest.fixture
async def approver(make_client: MakeClient) -> httpx.AsyncClient:
    """A client authenticated as the approver ``alice``."""
    return await make_client("alice", "approver")


@pytest.fixture
async def admin(make_client: MakeClient) -> httpx.AsyncClient:
    """A client authenticated as the admin ``root``."""
    return await make_client("root", "admin")
