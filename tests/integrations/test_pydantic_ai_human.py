"""Real pydantic-ai agents ask a person through signoff and get only the answer back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai", reason="needs the pydantic-ai extra: pip install 'signoff[pydantic-ai]'"
)

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

from signoff.backends import Backend, LocalBackend
from signoff.domain.requests import Request
from signoff.errors import InvalidDecision, InvalidRequest
from signoff.integrations.pydantic_ai.human import NO_ANSWER, human_toolset
from signoff.store.base import RequestQuery
from signoff.testing import AGENT, APPROVER, memory_service
from tests.integrations.conftest import Sides

Decide = Callable[[Backend, Request], Awaitable[None]]

DBS = ["Postgres", "SQLite", "MySQL"]


class Script:
    """A FunctionModel that makes the given tool calls once, then answers "done"."""

    def __init__(self, *turns: list[ToolCallPart]) -> None:
        self.turns = list(turns)
        self.seen: list[list[ModelMessage]] = []
        self.info: AgentInfo | None = None

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.info = info
        if self.turns:
            return ModelResponse(parts=self.turns.pop(0))
        return ModelResponse(parts=[TextPart("done")])

    def returned(self, tool_call_id: str) -> list[ToolReturnPart]:
        """Every tool return the model was shown for this call id, in the last turn's history."""
        return [
            part
            for message in self.seen[-1]
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.tool_call_id == tool_call_id
        ]

    def model_visible_text(self) -> str:
        """All content the model received in requests, as one string."""
        return "\n".join(
            str(getattr(part, "content", ""))
            for messages in self.seen
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
        )


def pick(call_id: str = "call_pick", **args: Any) -> ToolCallPart:
    """The model's call of human_intervention_request."""
    body: dict[str, Any] = {"prompt": "Which database should I migrate?", "options": DBS}
    return ToolCallPart("human_intervention_request", {**body, **args}, tool_call_id=call_id)


def ask(call_id: str = "call_ask") -> ToolCallPart:
    """The model's call of request_human_input."""
    questions = ["Which day should the release go out?", "Which region first?"]
    return ToolCallPart("request_human_input", {"questions": questions}, tool_call_id=call_id)


async def pending(person: Backend, wait_s: float = 5.0) -> Request:
    """The one pending request, once the agent has opened it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while loop.time() < deadline:
        page = await person.list_requests(RequestQuery(status="pending"))
        if page.items:
            assert len(page.items) == 1
            return page.items[0]
        await asyncio.sleep(0.01)
    raise AssertionError("the agent never opened a request")


def deciding(decision: dict[str, Any]) -> Decide:
    """A person who makes ``decision`` on the pending request."""

    async def decide(person: Backend, request: Request) -> None:
        await person.decide(request.id, decision)

    return decide


async def run(
    agent_backend: Backend,
    person: Backend,
    script: Script,
    decide: Decide | None,
    *,
    timeout_s: float = 10,
) -> Request | None:
    """Run an agent on ``script`` while the person decides what it asks; the request decided."""
    tools = human_toolset(agent_backend, session_id="sess-1", timeout_s=timeout_s)
    agent = Agent(FunctionModel(script), toolsets=[tools])

    async def person_side() -> Request | None:
        if decide is None:
            return None
        request = await pending(person)
        await decide(person, request)
        return request

    result, request = await asyncio.gather(agent.run("Migrate the database."), person_side())
    assert result.output == "done"
    return request


def assert_clean(script: Script) -> None:
    """Nothing of signoff's protocol reached the model."""
    text = script.model_visible_text()
    assert "req_" not in text
    assert "status" not in text


async def test_chosen_option_text_is_the_tool_result(sides: Sides) -> None:
    """The model gets exactly the chosen option's text on its own tool-call id."""
    script = Script([pick(context="The nightly job is slow.")])
    request = await run(
        sides.agent, sides.person, script, deciding({"type": "choose", "choice": "SQLite"})
    )

    [returned] = script.returned("call_pick")
    assert returned.content == "SQLite"
    assert returned.tool_name == "human_intervention_request"
    assert request is not None and request.kind == "choice"
    assert request.prompt == "Which database should I migrate?"
    assert request.options == tuple(DBS)
    assert request.context == "The nightly job is slow."
    assert_clean(script)


async def test_multi_select_returns_the_list(sides: Sides) -> None:
    """With multi_select the model gets the list of chosen options."""
    script = Script([pick(multi_select=True)])
    decision = {"type": "choose", "choices": ["Postgres", "MySQL"]}
    await run(sides.agent, sides.person, script, deciding(decision))

    [returned] = script.returned("call_pick")
    assert returned.content == ["Postgres", "MySQL"]
    assert_clean(script)


async def test_choice_outside_options_is_refused_then_valid_one_wins(sides: Sides) -> None:
    """A choice outside the options is refused and leaves the request pending; a valid one wins."""

    async def decide(person: Backend, request: Request) -> None:
        with pytest.raises(InvalidDecision):
            await person.decide(request.id, {"type": "choose", "choice": "Oracle"})
        assert (await person.get(request.id)).status == "pending"
        await person.decide(request.id, {"type": "choose", "choice": "MySQL"})

    script = Script([pick()])
    await run(sides.agent, sides.person, script, decide)

    [returned] = script.returned("call_pick")
    assert returned.content == "MySQL"
    assert "Oracle" not in script.model_visible_text()
    assert_clean(script)


async def test_other_free_text_comes_back_as_given(sides: Sides) -> None:
    """With allow_other a free-text answer reaches the model exactly as the person typed it."""
    script = Script([pick(allow_other=True)])
    decision = {"type": "choose", "choice": "MariaDB 11, on the new host"}
    await run(sides.agent, sides.person, script, deciding(decision))

    [returned] = script.returned("call_pick")
    assert returned.content == "MariaDB 11, on the new host"
    assert_clean(script)


async def test_rejected_choice_is_a_sentence_with_the_reason(sides: Sides) -> None:
    """A declined choice reaches the model as one sentence carrying the person's reason."""
    script = Script([pick()])
    await run(sides.agent, sides.person, script, deciding({"type": "reject", "reason": "Ask Bob."}))

    [returned] = script.returned("call_pick")
    assert returned.content == "The person declined to choose. Their reason: Ask Bob."
    assert_clean(script)


async def test_no_answer_in_time_says_so_and_withdraws_the_request(sides: Sides) -> None:
    """When nobody decides in time the model is told so and nothing is left pending."""
    script = Script([pick(timeout_s=0.3)])
    await run(sides.agent, sides.person, script, None, timeout_s=10)

    [returned] = script.returned("call_pick")
    assert returned.content == NO_ANSWER
    page = await sides.person.list_requests(RequestQuery(kind="choice"))
    assert [r.status for r in page.items] in (["expired"], ["canceled"])
    assert_clean(script)


async def test_retried_run_reuses_the_request_of_the_same_tool_call(sides: Sides) -> None:
    """Running the same tool call again returns the earlier decision without asking again."""
    first = Script([pick()])
    await run(sides.agent, sides.person, first, deciding({"type": "choose", "choice": "Postgres"}))
    again = Script([pick()])
    await run(sides.agent, sides.person, again, None)

    [returned] = again.returned("call_pick")
    assert returned.content == "Postgres"
    page = await sides.person.list_requests(RequestQuery(kind="choice"))
    assert len(page.items) == 1


async def test_unusable_options_go_back_to_the_model_as_a_retry(sides: Sides) -> None:
    """Duplicate options are not submitted; the model is asked to fix them and tries again."""
    script = Script([pick("call_bad", options=["A", "A"])], [pick("call_good")])
    await run(sides.agent, sides.person, script, deciding({"type": "choose", "choice": "SQLite"}))

    [retry] = script.returned("call_bad")
    assert retry.outcome == "retried"
    assert "distinct" in retry.model_response_str()
    [returned] = script.returned("call_good")
    assert returned.content == "SQLite"
    assert_clean(script)


async def test_questions_approved_tells_the_agent_to_finish(sides: Sides) -> None:
    """An approved questions request tells the agent the person approved and it should finish."""
    script = Script([ask()])
    request = await run(sides.agent, sides.person, script, deciding({"type": "approve"}))

    [returned] = script.returned("call_ask")
    assert returned.content == "The person approved. Finish the task now; do not ask them again."
    assert request is not None and request.kind == "questions"
    assert [q.text for q in request.questions] == [
        "Which day should the release go out?",
        "Which region first?",
    ]
    assert_clean(script)


async def test_questions_answered_returns_feedback_and_answers(sides: Sides) -> None:
    """An answer gives the agent the feedback and each question's answer, so it continues."""
    decision = {
        "type": "answer",
        "feedback": "Keep the rollout small.",
        "answers": {"q1": "Friday"},
    }
    script = Script([ask()])
    await run(sides.agent, sides.person, script, deciding(decision))

    [returned] = script.returned("call_ask")
    assert returned.content == (
        "The person answered. Continue the task using their reply.\n"
        "Feedback: Keep the rollout small.\n"
        "Q: Which day should the release go out?\n"
        "A: Friday\n"
        "Q: Which region first?\n"
        "A: (no answer)"
    )
    assert_clean(script)


async def test_questions_rejected_tells_the_agent_to_stop(sides: Sides) -> None:
    """A rejected questions request tells the agent to stop, with the person's reason."""
    script = Script([ask()])
    decision = {"type": "reject", "reason": "Release is frozen."}
    await run(sides.agent, sides.person, script, deciding(decision))

    [returned] = script.returned("call_ask")
    assert returned.content == (
        "The person rejected this. Stop the task and do not continue. "
        "Their reason: Release is frozen."
    )
    assert_clean(script)


async def test_tools_are_described_to_the_model_from_their_docstrings(sides: Sides) -> None:
    """The model sees both tools with descriptions and parameter descriptions."""
    script = Script()
    await run(sides.agent, sides.person, script, None)

    assert script.info is not None
    tools = {tool.name: tool for tool in script.info.function_tools}
    assert set(tools) == {"human_intervention_request", "request_human_input"}
    pick_tool = tools["human_intervention_request"]
    assert (pick_tool.description or "").startswith("Ask a person to choose among options")
    props = pick_tool.parameters_json_schema["properties"]
    assert "distinct" in props["options"]["description"]
    assert pick_tool.parameters_json_schema["required"] == ["prompt", "options"]
    questions = tools["request_human_input"].parameters_json_schema["properties"]["questions"]
    assert "self-contained" in questions["description"]


async def test_in_process_service_needs_the_agent_principal() -> None:
    """A Service works as the backend with a principal, and without one is refused."""
    service = memory_service()
    with pytest.raises(InvalidRequest):
        human_toolset(service, session_id="sess-1")

    tools = human_toolset(service, session_id="sess-1", principal=AGENT)
    script = Script([pick()])
    agent = Agent(FunctionModel(script), toolsets=[tools])
    person = LocalBackend(service, APPROVER)

    async def person_side() -> None:
        request = await pending(person)
        await person.decide(request.id, {"type": "choose", "choice": "Postgres"})

    await asyncio.gather(agent.run("Migrate the database."), person_side())
    [returned] = script.returned("call_pick")
    assert returned.content == "Postgres"


def test_timeout_must_be_positive() -> None:
    """A toolset that would never wait is refused when built."""
    with pytest.raises(ValueError, match="timeout_s"):
        human_toolset(memory_service(), session_id="sess-1", principal=AGENT, timeout_s=0)
