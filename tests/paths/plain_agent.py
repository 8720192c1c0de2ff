"""The cheapest real agent: ``signoff.AsyncClient`` over HTTP, as every adapter uses it.

It files the scenario's request, waits for any transport's decision, claims and runs an
approved call with the arguments the grant names, and tells its "model" what
:mod:`signoff.integrations.outcomes` says (the words every adapter uses).
"""

from __future__ import annotations

import time
from typing import Any

from signoff.client import AsyncClient
from signoff.domain.requests import ApprovalRequest
from signoff.integrations.outcomes import (
    choice_result,
    denial,
    edit_note,
    questions_result,
    wait_decided,
)
from tests.paths.scenarios import (
    ARGS,
    ARGS_SCHEMA,
    OPTIONS,
    PROMPT,
    QUESTION,
    Outcome,
    PathsServer,
    Scenario,
    tool_result,
)


def new_request(scenario: Scenario, session_id: str) -> dict[str, Any]:
    """The body the agent submits for ``scenario``."""
    body: dict[str, Any] = {"session_id": session_id, "kind": scenario.kind}
    if scenario.kind == "approval":
        body |= {
            "tool_name": scenario.tool,
            "tool_args": ARGS,
            "tool_call_id": "call_1",
            "args_schema": ARGS_SCHEMA,
        }
    elif scenario.kind == "choice":
        body |= {"prompt": PROMPT, "options": OPTIONS}
    else:
        body |= {"questions": [{"id": "q1", "text": QUESTION}]}
    return body


async def file_request(paths: PathsServer, scenario: Scenario, session_id: str) -> str:
    """Submit the scenario's request as the agent; its id."""
    async with AsyncClient(paths.server.base, paths.agent_token) as agent:
        submitted = await agent.submit(new_request(scenario, session_id))
    return submitted.request.id


async def settle(paths: PathsServer, request_id: str, timeout: float = 30.0) -> Outcome:
    """As the agent: wait for the decision, run what it allows, and say what the model hears."""
    ran: list[dict[str, Any]] = []
    async with AsyncClient(paths.server.base, paths.agent_token) as agent:
        request = await wait_decided(agent, request_id, time.monotonic() + timeout)
        if not isinstance(request, ApprovalRequest):
            told: object = (
                choice_result(request) if request.kind == "choice" else questions_result(request)
            )
            return Outcome(request_id, str(told))
        if request.status != "approved":
            return Outcome(request_id, denial(request))
        args = dict(request.approved_args or request.tool_args)
        await agent.claim(request_id, args)
        ran.append(args)
        result = tool_result(args)
        await agent.complete(request_id, result)
        if args != request.tool_args:
            result = f"{result} {edit_note(args, request.tool_args)}"
        return Outcome(request_id, result, ran)
