"""What the MCP tests share: a person deciding over the API, tool results, HTTP servers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import mcp_types as types

from signoff.server.app import API
from tests.serving import bearer


async def listed(api: httpx.AsyncClient, **params: str) -> list[dict[str, Any]]:
    """The requests the server lists (filtered by ``params``)."""
    response = await api.get(f"{API}/requests", params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def pending_request(api: httpx.AsyncClient) -> dict[str, Any]:
    """The one pending request, once the MCP server under test has filed it."""
    for _ in range(300):
        items = await listed(api, status="pending")
        if items:
            assert len(items) == 1, items
            return items[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no request was filed")


async def decide(api: httpx.AsyncClient, request_id: str, body: dict[str, Any]) -> None:
    """Decide over the HTTP API; it must be accepted."""
    response = await api.post(f"{API}/requests/{request_id}/decision", json=body)
    assert response.status_code == 200, response.text


def text(result: types.CallToolResult) -> str:
    """A result's text blocks, joined."""
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


@asynccontextmanager
async def guarded_http_server(
    args: list[str], env: dict[str, str], port: int
) -> AsyncIterator[str]:
    """Run ``python ARGS`` (an MCP server with ``--http``) and yield its /mcp URL.

    Before yielding, checks that a request without the bearer token, or with a wrong
    one, gets 401 with ``WWW-Authenticate: Bearer``.
    """
    process = subprocess.Popen(  # noqa: ASYNC220 - started once; the test then awaits only
        [sys.executable, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx.AsyncClient(timeout=5) as plain:
            for _ in range(300):
                try:
                    refused = await plain.post(url, json={})
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"{args[:4]} did not listen on {url}")
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == "Bearer"
            wrong = await plain.post(url, json={}, headers=bearer("nope"))
            assert wrong.status_code == 401
        yield url
    finally:
        process.terminate()
        _, err = process.communicate(timeout=20)
    assert "Traceback" not in err, err
