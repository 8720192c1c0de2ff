"""A tool call as an agent files it over HTTP, and the helper that files it."""

from __future__ import annotations

from typing import Any

import httpx

from signoff.server.app import API

CALL: dict[str, Any] = {
    "session_id": "s1",
    "tool_name": "shell",
    "tool_args": {"command": "ls"},
    "tool_call_id": "call-1",
}


async def create(client: httpx.AsyncClient, **over: Any) -> dict[str, Any]:
    """POST a request and return its JSON."""
    response = await client.post(f"{API}/requests", json={**CALL, **over})
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body
