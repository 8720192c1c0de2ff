"""signoff.AsyncClient and signoff.Client: the service's operations over HTTP."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from signoff.client import AsyncClient, Client
from signoff.errors import (
    ArgsMismatch,
    GrantNotFound,
    InvalidDecision,
    InvalidRequest,
    InvalidTransition,
    NotAllowed,
    RequestNotFound,
    StoreUnavailable,
    Unauthenticated,
)
from signoff.server.app import create_app
from signoff.service import Service
from signoff.store.base import RequestQuery
from tests.serving import Server, agent_token


async def clients(service: Service) -> tuple[AsyncClient, AsyncClient]:
    """An agent client and an approver client over one in-process app."""
    transport = httpx.ASGITransport(app=create_app(service, sweep=False))
    agent_token_, _ = await service.create_token("bot", "agent")
    approver_token, _ = await service.create_token("alice", "approver")
    return (
        AsyncClient("http://signoff.test", agent_token_, transport=transport),
        AsyncClient("http://signoff.test", approver_token, transport=transport),
    )


async def test_async_client_lifecycle_and_errors(service: Service) -> None:
    """submit, wait, decide, claim and complete over HTTP; errors map to the same exceptions."""
    agent, approver = await clients(service)
    async with agent, approver:
        body = {"session_id": "s", "tool_name": "shell", "tool_args": {"c": 1}, "tool_call_id": "x"}
        submitted = await agent.submit(body)
        assert submitted.created and not (await agent.submit(body)).created
        request_id = submitted.request.id
        waiter = asyncio.create_task(agent.wait(request_id, timeout=10))
        await asyncio.sleep(0.05)
        with pytest.raises(NotAllowed):
            await agent.decide(request_id, {"type": "approve"})
        with pytest.raises(InvalidDecision):
            await approver.decide(request_id, {"type": "choose", "choice": "a"})
        await approver.decide(request_id, {"type": "approve", "scope": "session"})
        assert (await waiter).status == "approved"
        with pytest.raises(ArgsMismatch):
            await agent.claim(request_id, {"c": 2})
        assert (await agent.claim(request_id, {"c": 1})).status == "executing"
        with pytest.raises(InvalidTransition):
            await agent.claim(request_id, {"c": 1})
        assert (await agent.complete(request_id, {"out": "ok"})).status == "completed"
        with pytest.raises(RequestNotFound):
            await agent.get("req_missing")
        with pytest.raises(InvalidRequest):
            await agent.submit({"session_id": "s"})
        page = await approver.list_requests(RequestQuery(status="completed"))
        assert [r.id for r in page.items] == [request_id]
        found = RequestQuery(decided_by="alice", tool_name="shell", text="SHELL c", status="ended")
        assert [r.id for r in (await approver.list_requests(found)).items] == [request_id]
        assert (await approver.list_requests(RequestQuery(text="nowhere"))).items == []
        grants = await approver.list_grants()
        assert len(grants) == 1
        await approver.revoke_grant(grants[0].id)
        with pytest.raises(GrantNotFound):
            await approver.revoke_grant("grt_missing")
        assert [e.action for e in await agent.audit(request_id)][:2] == ["submit", "decide"]
        other = (await agent.submit({"session_id": "s", "tool_name": "t"})).request
        outcomes = await approver.decide_many([other.id, request_id], "reject", "no")
        assert outcomes[0].status == "rejected"
        assert isinstance(outcomes[1].error, InvalidTransition)
        assert (await approver.me()).name == "alice"


async def test_unreachable_server_and_bad_token() -> None:
    """A server that is not there is StoreUnavailable; a bad token is Unauthenticated."""
    async with AsyncClient("http://127.0.0.1:9", "so_x", timeout=2) as nowhere:
        with pytest.raises(StoreUnavailable):
            await nowhere.get("req_x")


async def test_bad_token_is_unauthenticated(service: Service) -> None:
    """A token the server does not know raises Unauthenticated."""
    transport = httpx.ASGITransport(app=create_app(service, sweep=False))
    async with AsyncClient("http://signoff.test", "so_bogus", transport=transport) as client:
        with pytest.raises(Unauthenticated):
            await client.me()


def test_sync_client_against_a_real_server(server: Server) -> None:
    """The blocking client talks to a real ``signoff serve`` and waits for a decision."""
    assert server.admin_token is not None
    with (
        Client(server.base, agent_token(server)) as agent,
        Client(server.base, server.admin_token) as admin,
    ):
        request = agent.submit({"session_id": "sync", "tool_name": "t", "tool_args": {}}).request
        assert agent.wait(request.id, timeout=0.2).status == "pending"
        admin.decide(request.id, {"type": "reject", "reason": "not now"})
        decided = agent.wait(request.id, timeout=5)
        assert decided.status == "rejected"
        assert admin.verify_audit().ok
        anchor = admin.audit_anchor()
        assert anchor.seq == 4  # two tokens, the submit, the decision
        assert admin.verify_audit(str(anchor)).anchor == str(anchor)
        with pytest.raises(InvalidRequest):
            admin.verify_audit("4:nothex")
