"""The grants endpoints: listing and revoking standing approvals, in process."""

from __future__ import annotations

import httpx

from signoff.server.app import API
from tests.server.calls import create


async def test_grants_listed_and_revoked(
    agent: httpx.AsyncClient, approver: httpx.AsyncClient
) -> None:
    """A session-scoped approval creates a grant listed over HTTP and revocable there."""
    request = await create(agent)
    await approver.post(
        f"{API}/requests/{request['id']}/decision", json={"type": "approve", "scope": "session"}
    )
    grants = (await approver.get(f"{API}/grants")).json()["items"]
    assert len(grants) == 1
    assert (await agent.get(f"{API}/grants")).status_code == 403
    revoked = await approver.post(f"{API}/grants/{grants[0]['id']}/revoke")
    assert revoked.json()["revoked_by"] == "alice"
    assert (await approver.post(f"{API}/grants/grt_nope/revoke")).status_code == 404
