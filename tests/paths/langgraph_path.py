"""The LangGraph agent path: ``create_agent`` with ``HumanInTheLoopMiddleware`` and the bridge."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, InterruptOnConfig
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from signoff.client import AsyncClient
from signoff.integrations.langgraph import LangGraphBridge
from signoff.store.memory import MemoryStore
from tests.paths.scenarios import ARGS, Outcome, PathsServer, Scenario, tool_result

Person = Callable[[PathsServer, str, Scenario], Coroutine[Any, Any, str]]
"""A person deciding the session's request; the request's id."""


class ScriptedModel(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools (it ignores them: its replies are scripted)."""

    def bind_tools(
        self,
        tools: Sequence[builtins.dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self


async def run_langgraph(
    paths: PathsServer,
    scenario: Scenario,
    session_id: str,
    person: Person,
    allowed: list[str] | None = None,
) -> Outcome:
    """One gated call in a LangGraph agent; the bridge files it, waits, and resumes the graph.

    ``allowed`` narrows the middleware's review (e.g. approve and reject only).
    """
    ran: list[dict[str, Any]] = []

    def deploy(service: str, version: str) -> str:
        ran.append({"service": service, "version": version})
        return tool_result({"service": service, "version": version})

    review: bool | InterruptOnConfig = True
    if allowed is not None:
        review = InterruptOnConfig(allowed_decisions=allowed)  # type: ignore[typeddict-item]
    tool = StructuredTool.from_function(deploy, name=scenario.tool, description="Deploy.")
    call = {"name": scenario.tool, "args": dict(ARGS), "id": "call_1", "type": "tool_call"}
    model = ScriptedModel(
        messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="ok")])
    )
    graph = create_agent(
        model,
        tools=[tool],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={scenario.tool: review})],
        checkpointer=InMemorySaver(),
    )
    store = MemoryStore()
    await store.open()
    async with AsyncClient(paths.server.base, paths.agent_token) as backend:
        bridge = LangGraphBridge(graph, backend, store)
        paused = await bridge.run({"messages": [{"role": "user", "content": "go"}]}, session_id)
        assert paused.task.status == "Paused", paused.task
        deciding = asyncio.create_task(person(paths, session_id, scenario))
        request_id = await deciding
        resumed = await bridge.resume(session_id, wait=30)
    await store.close()
    assert resumed is not None
    told = [m for m in resumed.output["messages"] if isinstance(m, ToolMessage)]
    assert len(told) == 1, told
    return Outcome(request_id, str(told[0].content), ran)
