"""Attack: an agent keeps using a standing grant after it was revoked on another server.

Each server keeps the live grants it read for a tool and requester, so that a submit need
not read them again. An agent that was granted a tool "always" goes on calling it through
one server while a person revokes the grant through another: every call the agent submits
after the revoke was acknowledged must wait for a person, however recently the first
server used the grant. So must calls with arguments the grant's pattern never covered.
"""

from __future__ import annotations

from typing import Any

import httpx

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, new_token


async def test_a_grant_revoked_on_one_server_approves_nothing_on_the_other(
    two_nodes: tuple[Server, Server],
) -> None:
    used, revoker = two_nodes
    agent = bearer(agent_token(used))
    person = bearer(new_token(used, "alice", "approver")[0])

    async def submit(http: httpx.AsyncClient, args: dict[str, Any]) -> dict[str, Any]:
        body = {"session_id": "s", "tool_name": "deploy", "tool_args": args}
        made = await http.post(f"{API}/requests", json=body, headers=agent)
        assert made.status_code in (200, 201), made.text
        return dict(made.json())

    async with (
        httpx.AsyncClient(base_url=used.base, timeout=30) as on_used,
        httpx.AsyncClient(base_url=revoker.base, timeout=30) as on_revoker,
    ):
        first = await submit(on_used, {"target": "staging"})
        decided = await on_revoker.post(
            f"{API}/requests/{first['id']}/decision",
            json={"type": "approve", "scope": "always", "args_pattern": {"target": "staging"}},
            headers=person,
        )
        assert decided.status_code == 200, decided.text
        for _ in range(3):  # the first server reads the new grant, then keeps it
            granted = await submit(on_used, {"target": "staging"})
            assert granted["status"] == "approved" and granted["grant_id"], granted
        outside = await submit(on_used, {"target": "production"})
        assert outside["status"] == "pending", outside
        revoked = await on_revoker.post(
            f"{API}/grants/{granted['grant_id']}/revoke", headers=person
        )
        assert revoked.status_code == 200, revoked.text
        for _ in range(3):
            after = await submit(on_used, {"target": "staging"})
            assert after["status"] == "pending", after
        audit = await on_revoker.get(
            f"{API}/audit", params={"request_id": after["id"]}, headers=person
        )
        assert audit.status_code == 200, audit.text
        assert [entry["actor"] for entry in audit.json()["items"]] == ["bot"]
