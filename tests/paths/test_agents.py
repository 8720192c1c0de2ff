"""Every way an agent files and runs, each with the cheapest decider: one decision, one outcome.

The person decides over HTTP with ``signoff.AsyncClient`` as an admin, against the module's
real ``signoff serve``; the agent is a real framework run on a scripted model (no network,
no key), talking to the same server over HTTP with an agent token. Each combination must end
in the same request state, audit projection, model text and tool runs as the scenario says.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from signoff.client import AsyncClient
from signoff.errors import InvalidDecision, InvalidTransition
from tests.paths.plain_agent import file_request, settle
from tests.paths.scenarios import (
    AGENT_NAME,
    ARGS,
    ARGS_SCHEMA,
    EXPIRES_IN,
    FORBIDDEN_EDIT,
    OPTIONS,
    POLICY,
    PROMPT,
    QUESTION,
    Outcome,
    PathsServer,
    Scenario,
    check,
    decision_for,
    scenarios,
    tool_result,
)
from tests.serving import bearer

if TYPE_CHECKING:
    from tests.paths.mcp_paths import McpHost, Proxy

Run = Callable[[PathsServer, Scenario, str], Awaitable[Outcome]]
"""An agent path: run the scenario's call in this session as the agent; its outcome."""


async def filed(paths: PathsServer, session_id: str, timeout: float = 20.0) -> dict[str, Any]:
    """The one pending request in ``session_id``, once the agent has filed it.

    Sessions held for a whole module (MCP) settle each request before the next is filed.
    """
    async with httpx.AsyncClient(
        base_url=paths.api, headers=bearer(paths.admin_token), timeout=10
    ) as http:
        for _ in range(int(timeout / 0.05)):
            query = {"session_id": session_id, "status": "pending"}
            items = (await http.get("/requests", params=query)).json()
            if items["items"]:
                assert len(items["items"]) == 1, items
                found: dict[str, Any] = items["items"][0]
                return found
            await asyncio.sleep(0.05)
    raise AssertionError(f"the agent filed nothing in {session_id}")


async def decide_as_person(paths: PathsServer, session_id: str, scenario: Scenario) -> str:
    """As a person over HTTP: decide the session's request as the scenario says; its id."""
    request = await filed(paths, session_id)
    async with AsyncClient(paths.server.base, paths.admin_token) as person:

        async def one(decision: dict[str, Any]) -> bool:
            try:
                await person.decide(request["id"], decision_for(decision, request))
            except InvalidTransition:
                return False
            return True

        if scenario.refused is not None:
            with pytest.raises(InvalidDecision):
                await person.decide(request["id"], scenario.refused)
            assert (await person.get(request["id"])).status == "pending"
        if scenario.race is not None:
            taken = await asyncio.gather(*(one(d) for d in scenario.race))
            assert sorted(taken) == [False, True], taken
        elif scenario.decision is not None:
            assert await one(scenario.decision)
    return str(request["id"])


# plain AsyncClient ------------------------------------------------------------------------


async def run_plain(paths: PathsServer, scenario: Scenario, session_id: str) -> Outcome:
    """``AsyncClient`` only: submit, wait, claim, run, report."""
    person = asyncio.create_task(decide_as_person(paths, session_id, scenario))
    request_id = await file_request(paths, scenario, session_id)
    outcome = await settle(paths, request_id)
    assert await person == request_id
    return outcome


# plain Service in process --------------------------------------------------------------


FOLLOW_WITHIN = 3.0
"""Seconds an in-process agent may take to see another process's decision (README: 0.2 s)."""


async def run_service(paths: PathsServer, scenario: Scenario, session_id: str) -> Outcome:
    """A ``Service`` in this process on the server's SQLite file, acting as the agent."""
    from signoff.backends import LocalBackend
    from signoff.domain.policies import Policy
    from signoff.domain.principals import Principal
    from signoff.integrations.outcomes import denial, edit_note
    from signoff.service import Service
    from signoff.store.sqlite import SQLiteStore
    from tests.paths.plain_agent import new_request

    # the operator's policy is the process's own: give this one the server's tools.toml
    policy = Policy.from_toml(POLICY)
    async with Service(SQLiteStore(paths.db_path), policy=policy) as service:
        agent = LocalBackend(service, Principal(name=AGENT_NAME, role="agent"))
        submitted = await agent.submit(new_request(scenario, session_id))
        request_id = submitted.request.id
        person = asyncio.create_task(decide_as_person(paths, session_id, scenario))
        waits = FOLLOW_WITHIN + (EXPIRES_IN if scenario.name == "expiry" else 0)
        began = time.monotonic()
        request = await agent.wait(request_id, waits)
        took = time.monotonic() - began
        await person
        if request.status == "pending" or took > waits - FOLLOW_WITHIN / 2:
            pytest.fail(
                f"the in-process agent waited {took:.1f} s ({request.status}) for an outcome"
            )
        if request.status != "approved":
            return Outcome(request_id, denial(request))
        args = dict(getattr(request, "approved_args", None) or ARGS)
        await agent.claim(request_id, args)
        await agent.complete(request_id, tool_result(args))
        told = tool_result(args) + ("" if args == ARGS else " " + edit_note(args, ARGS))
        return Outcome(request_id, told, [args])


# pydantic-ai ------------------------------------------------------------------------------


async def run_pydantic_ai(paths: PathsServer, scenario: Scenario, session_id: str) -> Outcome:
    """A pydantic-ai agent on a FunctionModel: deferred tools, or the human toolset."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from signoff.domain.policies import Policy
    from signoff.integrations.pydantic_ai import run_with_signoff
    from signoff.integrations.pydantic_ai.human import human_toolset

    if scenario.kind == "approval":
        call = ToolCallPart(scenario.tool, dict(ARGS), tool_call_id="call_1")
    elif scenario.kind == "choice":
        call = ToolCallPart(
            "human_intervention_request", {"prompt": PROMPT, "options": OPTIONS}, "call_1"
        )
    else:
        call = ToolCallPart("request_human_input", {"questions": [QUESTION]}, "call_1")
    told: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            p
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if not returns:
            return ModelResponse(parts=[call])
        told.extend(p.model_response_str() for p in returns)
        return ModelResponse(parts=[TextPart("done")])

    ran: list[dict[str, Any]] = []
    async with AsyncClient(paths.server.base, paths.agent_token) as backend:
        agent: Agent[None, str] = Agent(
            FunctionModel(respond), toolsets=[human_toolset(backend, session_id=session_id)]
        )

        def deploy(service: str, version: str) -> str:
            """Deploy a version."""
            ran.append({"service": service, "version": version})
            return tool_result({"service": service, "version": version})

        agent.tool_plain(name=scenario.tool)(deploy)
        person = asyncio.create_task(decide_as_person(paths, session_id, scenario))
        policy = Policy.from_toml(f'[tools]\nneed_approval = ["{scenario.tool}"]\n')
        await run_with_signoff(
            agent, "go", signoff=backend, session_id=session_id, policy=policy, timeout=30
        )
        request_id = await person
    assert len(told) == 1, told
    return Outcome(request_id, told[0], ran)


# chat-completions -------------------------------------------------------------------------


async def run_chat_completions(paths: PathsServer, scenario: Scenario, session_id: str) -> Outcome:
    """``resolve_tool_calls`` on an assistant message, as a chat-completions loop does."""
    from signoff.integrations.openai_messages import resolve_tool_calls

    if scenario.kind == "approval":
        name, args = scenario.tool, dict(ARGS)
    else:
        name, args = "human_intervention_request", {"prompt": PROMPT, "options": OPTIONS}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }
    ran: list[dict[str, Any]] = []

    async def deploy(service: str, version: str) -> str:
        ran.append({"service": service, "version": version})
        return tool_result({"service": service, "version": version})

    async with AsyncClient(paths.server.base, paths.agent_token) as backend:
        person = asyncio.create_task(decide_as_person(paths, session_id, scenario))
        messages = await resolve_tool_calls(
            message,
            {scenario.tool: deploy},
            signoff=backend,
            session_id=session_id,
            timeout=30,
            tools=[
                {
                    "type": "function",
                    "function": {"name": scenario.tool, "parameters": ARGS_SCHEMA},
                }
            ],
        )
        request_id = await person
    tool_messages = [m for m in messages if m["role"] == "tool"]
    assert len(tool_messages) == 1, messages
    return Outcome(request_id, tool_messages[0]["content"], ran)


# OpenAI Agents SDK ------------------------------------------------------------------------


async def run_agents_sdk(paths: PathsServer, scenario: Scenario, session_id: str) -> Outcome:
    """An Agents SDK agent on a ScriptedModel with a ``needs_approval`` function tool."""
    pytest.importorskip("agents", reason="needs the openai-agents extra")
    from tests.paths.agents_sdk import run_agents_sdk as run

    return await run(paths, scenario, session_id, decide_as_person)


async def run_langgraph(paths: PathsServer, scenario: Scenario, session_id: str) -> Outcome:
    """A LangGraph ``create_agent`` with ``HumanInTheLoopMiddleware``, through the bridge."""
    pytest.importorskip("langgraph", reason="needs the langgraph extra")
    from tests.paths.langgraph_path import run_langgraph as run

    return await run(paths, scenario, session_id, decide_as_person)


AGENTS: dict[str, tuple[Run, tuple[str, ...]]] = {
    "plain": (run_plain, ("approval", "choice", "questions")),
    "service": (run_service, ("approval",)),
    "pydantic-ai": (run_pydantic_ai, ("approval", "choice", "questions")),
    "chat-completions": (run_chat_completions, ("approval", "choice")),
    "agents-sdk": (run_agents_sdk, ("approval",)),
    "langgraph": (run_langgraph, ("approval",)),
}
"""Each agent path and the request kinds it can file."""

XFAIL: dict[str, str] = {}
"""Known differences, strict so that the fix un-marks them; each is in the lead's report."""


def _param(agent: str, scenario: Scenario) -> Any:
    key = f"{agent}-{scenario.name}"
    reason = XFAIL.get(key)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(agent, scenario, id=key, marks=marks)


COMBINATIONS = [
    _param(agent, scenario)
    for agent, (_, kinds) in AGENTS.items()
    for scenario in scenarios()
    if scenario.kind in kinds
]


@pytest.mark.parametrize(("agent", "scenario"), COMBINATIONS)
async def test_agent_path(paths: PathsServer, agent: str, scenario: Scenario) -> None:
    """A decision reaches this agent path exactly as the scenario says."""
    run, _ = AGENTS[agent]
    session = f"{agent}-{scenario.name}-{secrets.token_hex(3)}"
    outcome = await asyncio.wait_for(run(paths, scenario, session), 60)
    check(paths, scenario, outcome)


@pytest.mark.parametrize("scenario", scenarios("approval"), ids=lambda s: s.name)
async def test_mcp_proxy_path(paths: PathsServer, mcp_proxy: Proxy, scenario: Scenario) -> None:
    """A decision reaches a call made through ``signoff mcp-proxy`` as the scenario says."""
    from tests.paths.mcp_paths import run_proxy

    outcome = await asyncio.wait_for(run_proxy(mcp_proxy, paths, scenario, decide_as_person), 60)
    check(paths, scenario, outcome)


@pytest.mark.parametrize("scenario", scenarios("choice", "questions"), ids=lambda s: s.name)
async def test_mcp_server_path(paths: PathsServer, mcp_server: McpHost, scenario: Scenario) -> None:
    """A choice or an answer reaches ``signoff mcp-server``'s tools as the scenario says."""
    from tests.paths.mcp_paths import run_server

    run = run_server(mcp_server, "mcp-server-paths", paths, scenario, decide_as_person)
    outcome = await asyncio.wait_for(run, 60)
    check(paths, scenario, outcome)


@pytest.mark.parametrize("scenario", scenarios("approval"), ids=lambda s: s.name)
async def test_hosted_run_path(paths: PathsServer, scenario: Scenario) -> None:
    """A hosted run (``signoff serve --agent``) gets a person's decision as the scenario says."""
    pytest.importorskip("pydantic_ai", reason="hosted runs need the pydantic-ai extra")
    from tests.paths import hosted

    session = f"hosted-{scenario.name}-{secrets.token_hex(3)}"
    before = len(hosted.ran(paths))
    task = await hosted.start(paths, scenario, session)
    assert await decide_as_person(paths, session, scenario) == task["request_id"]
    check(paths, scenario, await hosted.finish(paths, task, before))


async def test_langgraph_review_that_forbids_edits(paths: PathsServer) -> None:
    """A LangGraph review allowing only approve and reject refuses an edit (422, still pending)."""
    pytest.importorskip("langgraph", reason="needs the langgraph extra")
    from tests.paths.langgraph_path import run_langgraph as run

    scenario = FORBIDDEN_EDIT
    session = f"langgraph-review-{secrets.token_hex(3)}"
    run_ = run(paths, scenario, session, decide_as_person, allowed=["approve", "reject"])
    check(paths, scenario, await asyncio.wait_for(run_, 60))
