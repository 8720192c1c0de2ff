"""What the MCP tests share: reading a tool result, and an MCP server over HTTP."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import mcp_types as types

from tests.serving import bearer


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
        [sys.executable, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
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
