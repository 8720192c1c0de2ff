"""A stopping app in process: long polls get a retryable 503, and clients ask again."""

from __future__ import annotations

import asyncio

import httpx

from signoff.client import API, AsyncClient
from signoff.server.app import create_app
from signoff.server.shutdown import Shutdown
from signoff.service import Service
from tests.serving import bearer


async def test_wait_answers_503_with_retry_after_when_stopping(service: Service) -> None:
    """A long poll open when the server begins stopping gets 503 ServerStopping, Retry-After."""
    app = create_app(service, sweep=False)
    agent, _ = await service.create_token("bot", "agent")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://signoff.test"
    ) as http:
        made = await http.post(
            f"{API}/requests", json={"session_id": "s", "tool_name": "t"}, headers=bearer(agent)
        )
        request_id = made.json()["id"]
        poll = asyncio.create_task(
            http.get(
                f"{API}/requests/{request_id}/wait", params={"timeout": 30}, headers=bearer(agent)
            )
        )
        await asyncio.sleep(0.2)
        assert not poll.done()
        app.state.shutdown.begin()
        answer = await asyncio.wait_for(poll, 5)
    assert answer.status_code == 503
    assert answer.json() == {
        "error": "ServerStopping",
        "detail": "the server is shutting down; ask again once it is back",
    }
    assert answer.headers["retry-after"] == "1"
    assert (await service.get(request_id)).status == "pending"  # nothing changed


async def test_client_wait_asks_again_after_a_restart(service: Service) -> None:
    """AsyncClient.wait cut by a stopping server asks again and returns the decision."""
    app = create_app(service, sweep=False)
    transport = httpx.ASGITransport(app=app)
    agent, _ = await service.create_token("bot", "agent")
    approver, _ = await service.create_token("alice", "approver")
    async with (
        AsyncClient("http://signoff.test", agent, transport=transport) as asker,
        AsyncClient("http://signoff.test", approver, transport=transport) as person,
    ):
        made = await asker.submit({"session_id": "s", "tool_name": "t"})
        waiting = asyncio.create_task(asker.wait(made.request.id, 30))
        await asyncio.sleep(0.2)
        app.state.shutdown.begin()
        await asyncio.sleep(0.2)
        assert not waiting.done()  # 503 ServerStopping: it pauses and asks again
        app.state.shutdown = Shutdown()  # the server is back
        await person.decide(made.request.id, {"type": "approve"})
        decided = await asyncio.wait_for(waiting, 5)
    assert decided.status == "approved"


async def test_shutdown_ends_streams_and_waits_for_them() -> None:
    """begin() completes every stream's future; drained() returns once the streams closed."""
    shutdown = Shutdown()
    with shutdown.stream() as going:
        assert not going.done()
        shutdown.begin()
        assert going.done()
        drained = asyncio.create_task(shutdown.drained(5))
        await asyncio.sleep(0.05)
        assert not drained.done()  # the stream is still open
    await asyncio.wait_for(drained, 1)
    assert shutdown.future().done()  # a stream opened while stopping ends at once
