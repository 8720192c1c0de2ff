"""One request's whole life over HTTP, for the logging and metrics tests: submitted by an
agent, approved by a person, claimed and reported by the agent."""

from __future__ import annotations

from typing import Any

import httpx

from signoff.client import API
from tests.serving import Server, bearer


def lifecycle(server: Server, agent: str, args: dict[str, Any]) -> str:
    """Run ``shell`` with ``args`` through submit, approve (by the admin), claim and a
    report; the request's id."""
    assert server.admin_token is not None
    with (
        httpx.Client(base_url=server.base, headers=bearer(agent), timeout=30) as bot,
        httpx.Client(base_url=server.base, headers=bearer(server.admin_token)) as admin,
    ):
        created = bot.post(
            f"{API}/requests", json={"session_id": "life", "tool_name": "shell", "tool_args": args}
        )
        assert created.status_code == 201, created.text
        request_id: str = created.json()["id"]
        decided = admin.post(f"{API}/requests/{request_id}/decision", json={"type": "approve"})
        assert decided.status_code == 200, decided.text
        claimed = bot.post(f"{API}/requests/{request_id}/claim", json={"args": args})
        assert claimed.status_code == 200, claimed.text
        done = bot.post(f"{API}/requests/{request_id}/result", json={"ok": True, "result": "done"})
        assert done.status_code == 200, done.text
        return request_id
