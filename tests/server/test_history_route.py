"""GET /requests' history filters and search: requested_by, decided_by, tool_name, q, ended."""

from __future__ import annotations

from typing import Any

import httpx

from signoff.server.app import API
from signoff.testing import FakeClock
from tests.server.calls import create
from tests.server.conftest import MakeClient


async def listed(client: httpx.AsyncClient, **params: Any) -> list[str]:
    """The ids of one page of GET /requests with ``params``."""
    response = await client.get(f"{API}/requests", params=params)
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["items"]]


async def test_filters_and_search_over_http(
    make_client: MakeClient,
    agent: httpx.AsyncClient,
    approver: httpx.AsyncClient,
    clock: FakeClock,
) -> None:
    """Each new parameter narrows the list; they combine; an agent's stays its own."""
    other = await make_client("docs-bot", "agent")
    ls = await create(agent, tool_call_id="c1", tool_args={"command": "ls -la Build"})
    clock.advance(1)
    rm = await create(agent, tool_call_id="c2", tool_args={"command": "rm -rf build"})
    clock.advance(1)
    doc = await create(other, tool_call_id="c3", tool_name="write_file", tool_args={"p": "a.md"})
    decide = f"{API}/requests/{rm['id']}/decision"
    assert (await approver.post(decide, json={"type": "approve"})).status_code == 200
    assert await listed(approver, requested_by="docs-bot") == [doc["id"]]
    assert await listed(approver, decided_by="alice") == [rm["id"]]
    assert await listed(approver, tool_name="shell") == [rm["id"], ls["id"]]
    assert await listed(approver, status="ended") == [rm["id"]]
    assert await listed(approver, q="BUILD") == [rm["id"], ls["id"]]
    assert await listed(approver, q="build -rf", status="approved") == [rm["id"]]
    assert await listed(approver, q="a.md", requested_by="docs-bot") == [doc["id"]]
    # an agent's filters narrow its own requests only
    assert await listed(agent, requested_by="docs-bot") == [rm["id"], ls["id"]]
    assert await listed(agent, q="a.md") == []
    assert await listed(other, tool_name="shell") == []


BAD = [
    {"status": "finished"},
    {"q": ""},
    {"q": "x" * 201},
    {"q": "a\x00b"},
    {"q": "   "},
    {"decided_by": ""},
    {"tool_name": "t" * 201},
    {"requested_by": "a\x00"},
]


async def test_bad_values_are_422(approver: httpx.AsyncClient) -> None:
    """A value no store can compare is a 422 with error and detail, never a 500."""
    for params in BAD:
        response = await approver.get(f"{API}/requests", params=params)
        assert response.status_code == 422, (params, response.text)
        body = response.json()
        assert body["error"] and body["detail"]
