"""``claude -p --permission-prompt-tool mcp__signoff__approval_prompt``, from Claude Code's side.

Claude Code calls the tool with ``{"tool_name", "input", "tool_use_id"}`` and parses the first
text block of the result as ``{"behavior": "allow", "updatedInput": {...}}`` (updatedInput
required) or ``{"behavior": "deny", "message": "..."}``; anything else throws. The official
MCP client plays Claude Code against a real ``signoff mcp-server --permission-prompt`` filing
into a real ``signoff serve``, where a person decides over the HTTP API.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'signoff[mcp]'")

import mcp_types as types
from mcp import Client, StdioServerParameters

from tests.serving import (
    Server,
    agent_token,
    api_as,
    serve_for_module,
)

API = "/api/v1"
PROMPT = "approval_prompt"
INPUT: dict[str, Any] = {"command": "git push origin main", "description": "Push the release"}
CALL: dict[str, Any] = {"tool_name": "Bash", "input": INPUT}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``signoff serve`` for the module; each test files under its own session."""
    yield from serve_for_module(tmp_path_factory.mktemp("permission-prompt"))


@pytest.fixture(scope="module")
def token(served: Server) -> str:
    """The agent token ``signoff mcp-server`` files with."""
    return agent_token(served, "claude-p")


@pytest.fixture
async def admin(served: Server) -> AsyncIterator[httpx.AsyncClient]:
    """The server's API as the admin: the person deciding."""
    assert served.admin_token is not None
    async with api_as(served, served.admin_token) as client:
        yield client


@asynccontextmanager
async def claude(
    served: Server, token: str, session: str, wait: str = "60"
) -> AsyncIterator[Client]:
    """An MCP session with ``signoff mcp-server --permission-prompt``, as Claude Code opens
    it from ``.mcp.json`` (stdio)."""
    args = [
        "-m",
        "signoff",
        "mcp-server",
        "--server",
        served.base,
        "--token",
        token,
        "--permission-prompt",
        "--permission-wait",
        wait,
        "--session",
        session,
    ]
    params = StdioServerParameters(command=sys.executable, args=args, env=served.env)
    async with Client(params, mode="auto", cache=None) as client:
        yield client


def verdict(result: types.CallToolResult) -> dict[str, Any]:
    """What Claude Code reads: the first block, text, holding the JSON (never an error)."""
    assert not result.is_error
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    parsed: dict[str, Any] = json.loads(first.text)
    return parsed


async def pending_in(admin: httpx.AsyncClient, session: str) -> dict[str, Any]:
    """The request the prompt filed in ``session``, once it is there."""
    for _ in range(400):
        listed = await admin.get(f"{API}/requests", params={"session_id": session})
        items = [r for r in listed.json()["items"] if r["status"] == "pending"]
        if items:
            return dict(items[0])
        await asyncio.sleep(0.05)
    raise AssertionError("the permission prompt filed no request")


async def decided(
    client: Client, admin: httpx.AsyncClient, session: str, decision: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ask about CALL, decide its request with ``decision``: Claude Code's JSON, the request."""
    call_id = f"toolu_{uuid.uuid4().hex[:12]}"
    call = asyncio.create_task(client.call_tool(PROMPT, {**CALL, "tool_use_id": call_id}))
    request = await pending_in(admin, session)
    assert request["tool_call_id"] == call_id
    done = await admin.post(f"{API}/requests/{request['id']}/decision", json=decision)
    assert done.status_code == 200, done.text
    return verdict(await call), request


async def test_the_tool_is_listed_with_claude_codes_input(served: Server, token: str) -> None:
    """With --permission-prompt the tool is offered next to the others, taking tool_name,
    input and tool_use_id (extra fields Claude Code may add are not refused)."""
    async with claude(served, token, "claude-p-list") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert PROMPT in tools
    schema = tools[PROMPT].input_schema
    assert schema["required"] == ["tool_name", "input"]
    assert set(schema["properties"]) == {"tool_name", "input", "tool_use_id"}
    assert "additionalProperties" not in schema


async def test_approve_edit_and_reject_come_back_as_claude_code_reads_them(
    served: Server, token: str, admin: httpx.AsyncClient
) -> None:
    """In one ``claude -p`` run: an approval allows with updatedInput (required by Claude
    Code) equal to the input asked about; an edit allows with the person's whole input; a
    rejection denies with the reason in the message. Each request is the call, filed as the
    agent in the --session."""
    session = f"claude-p-{uuid.uuid4().hex[:8]}"
    async with claude(served, token, session) as client:
        allowed, request = await decided(client, admin, session, {"type": "approve"})
        assert allowed == {"behavior": "allow", "updatedInput": INPUT}
        assert request["tool_name"] == "Bash"
        assert request["tool_args"] == INPUT
        assert request["requested_by"] == "claude-p"
        assert request["context"]["via"] == "Claude Code hook (permission prompt tool)"

        edit = {**INPUT, "command": "git push origin release"}
        edited, _ = await decided(client, admin, session, {"type": "approve", "args": edit})
        assert edited == {"behavior": "allow", "updatedInput": edit}

        reason = "push to a branch and open a PR"
        denied, _ = await decided(client, admin, session, {"type": "reject", "reason": reason})
        assert denied["behavior"] == "deny"
        assert reason in denied["message"]
        assert set(denied) == {"behavior", "message"}


async def test_no_decision_in_time_denies_and_withdraws_the_request(
    served: Server, token: str, admin: httpx.AsyncClient
) -> None:
    """--permission-wait 1 and nobody decides: deny, and the request is canceled."""
    session = f"claude-p-{uuid.uuid4().hex[:8]}"
    async with claude(served, token, session, wait="1") as client:
        answer = verdict(await client.call_tool(PROMPT, CALL))
    assert answer["behavior"] == "deny"
    assert "no decision came in time" in answer["message"].lower()
    listed = await admin.get(f"{API}/requests", params={"session_id": session})
    [request] = listed.json()["items"]
    assert request["status"] == "canceled"


async def test_arguments_that_are_not_claude_codes_deny_and_file_nothing(
    served: Server, token: str, admin: httpx.AsyncClient
) -> None:
    """No tool_name, or an input that is not an object: a deny saying why (a JSON result,
    not an MCP error, which Claude Code could not read), and nothing is filed."""
    session = f"claude-p-{uuid.uuid4().hex[:8]}"
    async with claude(served, token, session) as client:
        bad: list[dict[str, Any]] = [{"input": {}}, {"tool_name": "Bash", "input": "rm -rf /"}]
        for args in bad:
            answer = verdict(await client.call_tool(PROMPT, args))
            assert answer["behavior"] == "deny"
            assert "could not read the permission prompt" in answer["message"]
    listed = await admin.get(f"{API}/requests", params={"session_id": session})
    assert listed.json()["items"] == []
