"""The inner loop against a real ``signoff serve`` process, decided from the CLI."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic_ai.messages import ToolCallPart

from signoff.client import Client
from signoff.integrations.pydantic_ai import run_with_signoff
from tests.integrations.test_pydantic_ai import ASK_ALL, script, tool_agent
from tests.serving import Server, agent_token


async def test_blocking_client_and_a_decision_from_another_process(server: Server) -> None:
    """signoff.Client works as the agent's signoff; an approval from the CLI resumes the run."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = tool_agent(script(ToolCallPart("shell", {"command": "ls"}, tool_call_id="c1")), ran)
    with Client(server.base, agent_token(server)) as client:
        running = asyncio.create_task(
            run_with_signoff(
                agent, "go", signoff=client, session_id="e2e", policy=ASK_ALL, timeout=30
            )
        )
        listed: list[dict[str, Any]] = []
        for _ in range(100):
            done = await asyncio.to_thread(server.cli, "pending", "--json")
            listed = json.loads(done.stdout or "[]")
            if listed:
                break
            await asyncio.sleep(0.1)
        assert [r["tool_name"] for r in listed] == ["shell"]
        approved = await asyncio.to_thread(server.cli, "approve", listed[0]["id"])
        assert approved.returncode == 0, approved.stderr
        result = await asyncio.wait_for(running, 30)
    assert result.output == "shell[c1]=ran ls"
    assert ran == [("shell", {"command": "ls", "timeout": 10})]
    shown = await asyncio.to_thread(server.cli, "show", listed[0]["id"], "--json")
    assert json.loads(shown.stdout)["status"] == "completed"
