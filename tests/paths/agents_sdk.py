"""The OpenAI Agents SDK agent path (its own module: the SDK reads the tool's annotations)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from agents import Agent, RunContextWrapper, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from signoff.client import AsyncClient
from signoff.integrations.openai_agents import run_with_signoff, signoff_args
from tests.paths.scenarios import ARGS, Outcome, PathsServer, Scenario, tool_result

Person = Callable[[PathsServer, str, Scenario], Coroutine[Any, Any, str]]
"""A person deciding the session's request; the request's id."""


async def run_agents_sdk(
    paths: PathsServer, scenario: Scenario, session_id: str, person: Person
) -> Outcome:
    """Run one gated call through ``run_with_signoff`` while ``person`` decides it."""
    set_tracing_disabled(True)
    ran: list[dict[str, Any]] = []

    async def deploy(ctx: RunContextWrapper[Any], service: str, version: str) -> str:
        """Deploy a version."""
        args = signoff_args(ctx, {"service": service, "version": version})
        ran.append(args)
        return tool_result(args)

    tool = function_tool(deploy, name_override=scenario.tool, needs_approval=True)
    model = ScriptedModel(
        [[function_call(scenario.tool, dict(ARGS), call_id="call_1")], [assistant_message("ok")]]
    )
    agent: Agent[Any] = Agent(name="ops", model=model, tools=[tool])
    async with AsyncClient(paths.server.base, paths.agent_token) as backend:
        deciding = asyncio.create_task(person(paths, session_id, scenario))
        await run_with_signoff(
            agent,
            "go",
            signoff=backend,
            session_id=session_id,
            editable={scenario.tool},
            timeout=30,
        )
        request_id = await deciding
    last = model.last_call
    assert last is not None and isinstance(last.input, list)
    outputs = [
        item["output"]
        for item in last.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert len(outputs) == 1, outputs
    return Outcome(request_id, str(outputs[0]), ran)
