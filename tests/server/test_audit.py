"""The audit endpoints: who reads and verifies the chain, in process."""

from __future__ import annotations

import httpx

from signoff.server.app import API
from tests.server.calls import create


async def test_audit_endpoints(
    agent: httpx.AsyncClient, approver: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    """Admins read and verify the chain; others see one request's entries at most."""
    request = await create(agent)
    await approver.post(f"{API}/requests/{request['id']}/decision", json={"type": "approve"})
    mine = (await agent.get(f"{API}/audit", params={"request_id": request["id"]})).json()
    assert [e["action"] for e in mine["items"]] == ["submit", "decide"]
    assert (await agent.get(f"{API}/audit")).status_code == 403
    assert (await approver.get(f"{API}/audit/verify")).status_code == 403
    verified = (await admin.get(f"{API}/audit/verify")).json()
    assert verified["ok"] is True and verified["entries"] >= 2
