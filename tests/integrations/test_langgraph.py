"""The LangGraph integration against real LangGraph graphs driven by a scripted chat model."""

from __future__ import annotations

import asyncio
import builtins
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

pytest.importorskip("langgraph", reason="needs the langgraph extra")

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, InterruptOnConfig
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from pydantic import Field, ValidationError

from signoff.backends import LocalBackend
from signoff.bus.local import LocalBus
from signoff.client import AsyncClient
from signoff.domain.requests import ApprovalRequest
from signoff.errors import InvalidDecision, InvalidRequest, InvalidTransition
from signoff.integrations.langgraph import (
    AGENT_NAME,
    FeedbackState,
    HumanFeedback,
    LangGraphBridge,
    ask_human,
    batch_response,
    check_middleware_decision,
)
from signoff.integrations.outcomes import edit_note
from signoff.server.app import API
from signoff.service import Service
from signoff.store.base import Write
from signoff.store.sqlite import SQLiteStore
from signoff.testing import AGENT, APPROVER
from tests.integrations.conftest import Sides
from tests.serving import Server, agent_token, bearer

Mode = Literal["per_call", "batched"]


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


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}: {body}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool
def lookup(query: str) -> str:
    """Look something up (needs no approval)."""
    return f"found {query}"


def _call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _parallel_model() -> ScriptedModel:
    """One turn with four parallel calls (three gated), then a final answer."""
    turn = AIMessage(
        content="",
        tool_calls=[
            _call("send_email", "c1", to="ann", body="hi"),
            _call("lookup", "c2", query="x"),
            _call("delete_file", "c3", path="/report"),
            _call("send_email", "c4", to="bob", body="yo"),
        ],
    )
    return ScriptedModel(messages=iter([turn, AIMessage(content="all done")]))


def _agent(model: ScriptedModel, checkpointer: Any, mode: Mode = "per_call") -> Any:
    return create_agent(
        model,
        tools=[send_email, delete_file, lookup],
        middleware=[
            HumanInTheLoopMiddleware(
                interrupt_on={"send_email": True, "delete_file": True}, interrupt_mode=mode
            )
        ],
        checkpointer=checkpointer,
    )


def _prompt(text: str = "go") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _tool_results(output: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in output["messages"] if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("mode", ["per_call", "batched"])
async def test_parallel_calls_mixed_decisions_while_the_run_waits(sides: Sides, mode: Mode) -> None:
    """Three parallel gated calls, approved / edited / rejected by a person while resume waits."""
    graph = _agent(_parallel_model(), InMemorySaver(), mode)
    bridge = LangGraphBridge(graph, sides.agent, sides.service.store)
    first = await bridge.run(_prompt(), "t-par")
    assert first.task.status == "Paused"
    assert [p.tool_call_id for p in first.task.pending] == ["c1", "c3", "c4"]
    assert len(first.interrupts) == (3 if mode == "per_call" else 1)

    waiter = asyncio.create_task(bridge.resume("t-par", wait=20))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    ids = {p.tool_call_id: p.request_id for p in first.task.pending}
    await sides.person.decide(ids["c1"], {"type": "approve"})
    await sides.person.decide(ids["c3"], {"type": "reject", "reason": "keep the report"})
    await sides.person.decide(ids["c4"], {"type": "approve", "args": {"to": "zoe", "body": "yo"}})
    resumed = await waiter

    assert resumed is not None
    assert resumed.task.status == "Completed"
    results = _tool_results(resumed.output)
    assert results["c1"].content == "sent to ann: hi"
    assert results["c2"].content == "found x"
    assert results["c3"].status == "error"
    assert "keep the report" in str(results["c3"].content)
    assert "sent to zoe: yo" in str(results["c4"].content)
    assert resumed.output["messages"][-1].content == "all done"
    statuses = {c: (await sides.agent.get(r)).status for c, r in ids.items()}
    assert statuses == {"c1": "completed", "c3": "rejected", "c4": "completed"}
    assert [h.kind for h in resumed.task.history] == ["approval", "rejection", "edit"]
    seen = " ".join(str(m.content) for m in resumed.output["messages"])
    for word in ("req_", "signoff", "approved_args", "tool_call_id"):
        assert word not in seen, f"the model's history holds {word!r}"  # no protocol content


class RecordingModel(ScriptedModel):
    """A ScriptedModel that keeps the tool results each of its calls was given."""

    seen: list[dict[str, Any]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(
            {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}
        )
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.parametrize("mode", ["per_call", "batched"])
async def test_the_model_reads_signoffs_words_not_the_middlewares(sides: Sides, mode: Mode) -> None:
    """The model reads a rejection and an edit as every other integration words them."""
    model = RecordingModel(messages=iter(list(_parallel_model().messages)))
    bridge = LangGraphBridge(_agent(model, InMemorySaver(), mode), sides.agent, sides.service.store)
    first = await bridge.run(_prompt(), f"t-words-{mode}")
    ids = {p.tool_call_id: p.request_id for p in first.task.pending}
    await sides.person.decide(ids["c1"], {"type": "approve"})
    await sides.person.decide(ids["c3"], {"type": "reject", "reason": "keep the report"})
    await sides.person.decide(ids["c4"], {"type": "approve", "args": {"to": "zoe", "body": "yo"}})
    resumed = await bridge.resume(f"t-words-{mode}", wait=20)

    assert resumed is not None and resumed.task.status == "Completed"
    assert model.seen[-1] == {
        "c1": "sent to ann: hi",
        "c2": "found x",
        "c3": "A person rejected this call: keep the report. It was not run.",
        "c4": "sent to zoe: yo\n\n"
        + edit_note({"to": "zoe", "body": "yo"}, {"to": "bob", "body": "yo"}),
    }
    edited = await sides.agent.get(ids["c4"])
    assert isinstance(edited, ApprovalRequest) and edited.result is not None
    assert edited.result.result == "sent to zoe: yo"  # the tool's own output, no note


async def test_restart_between_pause_and_resume(tmp_path: Path) -> None:
    """A new process (graph, bridge, store) on the same files finds the waiting thread."""
    checkpoints = str(tmp_path / "checkpoints.db")
    db = tmp_path / "signoff.db"

    store = SQLiteStore(db)
    await store.open()
    service = Service(store, bus=LocalBus())
    async with AsyncSqliteSaver.from_conn_string(checkpoints) as saver:
        bridge = LangGraphBridge(_agent(_parallel_model(), saver), service, store, principal=AGENT)
        paused = await bridge.run(_prompt(), "t-restart")
    for call in paused.task.pending:
        await service.decide(call.request_id, {"type": "approve"}, APPROVER)
    await store.close()

    store = SQLiteStore(db)
    await store.open()
    service = Service(store, bus=LocalBus())
    model = ScriptedModel(messages=iter([AIMessage(content="after restart")]))
    async with AsyncSqliteSaver.from_conn_string(checkpoints) as saver:
        bridge = LangGraphBridge(_agent(model, saver), service, store, principal=AGENT)
        waiting = await bridge.waiting()
        assert [(t.agent, t.session_id) for t in waiting] == [(AGENT_NAME, "t-restart")]
        resumed = await bridge.resume(waiting[0].session_id)
    assert resumed is not None
    assert resumed.task.status == "Completed"
    assert resumed.output["messages"][-1].content == "after restart"
    assert set(_tool_results(resumed.output)) == {"c1", "c2", "c3", "c4"}
    assert await bridge.waiting() == []
    await store.close()


async def test_resume_waits_until_every_request_is_decided(sides: Sides) -> None:
    """With a request still pending, resume returns None and the graph is not touched."""
    graph = _agent(_parallel_model(), InMemorySaver())
    bridge = LangGraphBridge(graph, sides.agent, sides.service.store)
    first = await bridge.run(_prompt(), "t-wait")
    await sides.person.decide(first.task.pending[0].request_id, {"type": "approve"})
    assert await bridge.resume("t-wait") is None
    assert len((await graph.aget_state({"configurable": {"thread_id": "t-wait"}})).interrupts) == 3


async def test_filing_twice_files_nothing_new(sides: Sides) -> None:
    """file() is idempotent: the same requests and the same Task record."""
    bridge = LangGraphBridge(
        _agent(_parallel_model(), InMemorySaver()), sides.agent, sides.service.store
    )
    first = await bridge.run(_prompt(), "t-idem")
    again = await bridge.file("t-idem")
    assert again == first.task
    page = await sides.service.store.list_tasks(limit=100)
    assert len([t for t in page if t.session_id == "t-idem"]) == 1


async def test_a_thread_that_pauses_again_keeps_one_record(sides: Sides) -> None:
    """Resume that stops on a new interrupt re-files it on the same Task; a run is refused."""
    model = ScriptedModel(
        messages=iter(
            [
                AIMessage(content="", tool_calls=[_call("delete_file", "m1", path="/a")]),
                AIMessage(content="", tool_calls=[_call("delete_file", "m2", path="/b")]),
                AIMessage(content="done"),
            ]
        )
    )
    bridge = LangGraphBridge(_agent(model, InMemorySaver()), sides.agent, sides.service.store)
    first = await bridge.run(_prompt(), "t-turns")
    with pytest.raises(InvalidTransition, match="resume it"):
        await bridge.run(_prompt("again"), "t-turns")
    await sides.person.decide(first.task.pending[0].request_id, {"type": "approve"})
    second = await bridge.resume("t-turns")
    assert second is not None
    assert second.task.id == first.task.id
    assert second.task.status == "Paused"
    assert [p.tool_call_id for p in second.task.pending] == ["m2"]
    await sides.person.decide(second.task.pending[0].request_id, {"type": "approve"})
    third = await bridge.resume("t-turns")
    assert third is not None
    assert (third.task.id, third.task.status) == (first.task.id, "Completed")
    assert third.output["messages"][-1].content == "done"
    records = await sides.service.store.list_tasks(limit=100)
    assert [t.id for t in records if t.session_id == "t-turns"] == [first.task.id]


async def test_stale_interrupt_id_is_refused(sides: Sides) -> None:
    """After the thread moved on outside the bridge, its old interrupt id is refused."""
    model = ScriptedModel(
        messages=iter(
            [
                AIMessage(content="", tool_calls=[_call("delete_file", "s1", path="/a")]),
                AIMessage(content="", tool_calls=[_call("delete_file", "s2", path="/b")]),
                AIMessage(content="done"),
            ]
        )
    )
    graph = _agent(model, InMemorySaver())
    bridge = LangGraphBridge(graph, sides.agent, sides.service.store)
    first = await bridge.run(_prompt(), "t-stale")
    cfg: RunnableConfig = {"configurable": {"thread_id": "t-stale"}}
    (old,) = (await graph.aget_state(cfg)).interrupts
    await graph.ainvoke(Command(resume={old.id: {"type": "approve"}}), cfg)
    (new,) = (await graph.aget_state(cfg)).interrupts
    assert new.id != old.id
    await sides.person.decide(first.task.pending[0].request_id, {"type": "reject", "reason": "no"})

    with pytest.raises(InvalidRequest, match="no longer pending"):
        await bridge.resume("t-stale")
    (still,) = (await graph.aget_state(cfg)).interrupts
    assert still.id == new.id  # the one pending interrupt did not take the map as its value


def test_edit_that_switches_tools_is_refused() -> None:
    """An edit naming another tool is refused, alone and inside a batch."""
    switch = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/"}}}
    with pytest.raises(InvalidDecision, match="not switch"):
        check_middleware_decision("send_email", switch)
    action = {"name": "send_email", "args": {"to": "a", "body": "b"}}
    with pytest.raises(InvalidDecision, match="not switch"):
        batch_response([action], [switch])
    same = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "z"}}}
    assert check_middleware_decision("send_email", same) == same


def test_batch_response_never_has_a_wrong_count_or_disallowed_type() -> None:
    """batch_response refuses a decision count other than the action count, and bad types."""
    actions = [{"name": "send_email", "args": {}}, {"name": "delete_file", "args": {}}]
    with pytest.raises(InvalidDecision, match="needs 2 decisions, got 1"):
        batch_response(actions, [{"type": "approve"}])
    with pytest.raises(InvalidDecision, match="needs 2 decisions, got 3"):
        batch_response(actions, [{"type": "approve"}] * 3)
    configs = [{"action_name": "delete_file", "allowed_decisions": ["approve", "reject"]}]
    with pytest.raises(InvalidDecision, match="'respond' is not allowed"):
        batch_response(actions, [{"type": "approve"}, {"type": "respond", "message": "x"}], configs)
    ok = batch_response(actions, [{"type": "approve"}, {"type": "reject", "message": "no"}])
    assert ok == {"decisions": [{"type": "approve"}, {"type": "reject", "message": "no"}]}


async def test_batched_index_that_no_longer_fits_sends_nothing(sides: Sides) -> None:
    """When the filed requests do not cover a batch, resume refuses and the thread stays paused."""
    graph = _agent(_parallel_model(), InMemorySaver(), "batched")
    bridge = LangGraphBridge(graph, sides.agent, sides.service.store)
    first = await bridge.run(_prompt(), "t-count")
    for call in first.task.pending:
        await sides.person.decide(call.request_id, {"type": "approve"})
    index = json.loads(first.task.messages)
    index[0]["request_ids"] = index[0]["request_ids"][:2]
    index[0]["allowed"] = index[0]["allowed"][:2]
    tampered = first.task.model_copy(
        update={
            "messages": json.dumps(index),
            "pending": first.task.pending[:2],
            "version": first.task.version + 1,
        }
    )
    await sides.service.store.commit(Write(at=tampered.updated_at, task=tampered))

    with pytest.raises(InvalidRequest, match="asks about 3 calls but 2 were filed"):
        await bridge.resume("t-count")
    state = await graph.aget_state({"configurable": {"thread_id": "t-count"}})
    assert len(state.interrupts) == 1
    assert (await bridge.task("t-count")) == tampered


async def test_per_call_respond_reaches_the_model(sides: Sides) -> None:
    """A respond decision becomes the tool's result without running it."""
    model = ScriptedModel(
        messages=iter(
            [
                AIMessage(content="", tool_calls=[_call("send_email", "r1", to="a", body="b")]),
                AIMessage(content="ok"),
            ]
        )
    )
    bridge = LangGraphBridge(_agent(model, InMemorySaver()), sides.agent, sides.service.store)
    first = await bridge.run(_prompt(), "t-respond")
    await sides.person.decide(
        first.task.pending[0].request_id, {"type": "respond", "feedback": "already sent"}
    )
    resumed = await bridge.resume("t-respond")
    assert resumed is not None
    result = _tool_results(resumed.output)["r1"]
    assert (result.content, result.status) == ("already sent", "success")


# -- ask_human ------------------------------------------------------------------------------


class AskState(FeedbackState):
    """State of the ask_human test graph."""

    outcome: str


def _questions_graph() -> Any:
    def ask(state: AskState) -> dict[str, Any]:
        response = ask_human(
            "Before I deploy:",
            questions=["Which region?", {"id": "when", "text": "When?", "required": True}],
        )
        return {"outcome": json.dumps(response.model_dump(mode="json"), sort_keys=True)}

    builder = StateGraph(AskState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ({"type": "approve"}, {"type": "approve"}),
        (
            {"type": "answer", "feedback": "careful", "answers": {"q1": "eu", "when": "now"}},
            {"type": "edit", "feedback": "careful", "answers": {"q1": "eu", "when": "now"}},
        ),
        ({"type": "reject", "reason": "not today"}, {"type": "reject", "reason": "not today"}),
    ],
)
async def test_ask_human_questions_flow(
    sides: Sides, decision: dict[str, Any], expected: dict[str, Any]
) -> None:
    """Questions filed as a signoff questions request; approve / answer / reject come back."""
    bridge = LangGraphBridge(_questions_graph(), sides.agent, sides.service.store)
    first = await bridge.run({"messages": [], "outcome": ""}, "t-q")
    (call,) = first.task.pending
    request = await sides.person.get(call.request_id)
    assert request.kind == "questions"
    assert [q.id for q in request.questions] == ["q1", "when"]
    assert request.allowed_decisions == ("approve", "answer", "reject")
    (interrupt,) = first.interrupts
    assert interrupt.value["allowed_decisions"] == ["approve", "edit", "reject"]
    assert interrupt.response_schema is not None

    await sides.person.decide(call.request_id, decision)
    resumed = await bridge.resume("t-q")
    assert resumed is not None
    outcome = json.loads(resumed.output["outcome"])
    assert {k: v for k, v in outcome.items() if k in expected} == expected


async def test_ask_human_refuses_a_bad_resume_value_without_saving_it() -> None:
    """A resume value that breaks the response schema is refused and the interrupt stays."""
    graph = _questions_graph()
    cfg: RunnableConfig = {"configurable": {"thread_id": "t-bad"}}
    await graph.ainvoke({"messages": [], "outcome": ""}, cfg)
    (pending,) = (await graph.aget_state(cfg)).interrupts
    missing_required = {"type": "edit", "answers": {"q1": "eu"}}
    with pytest.raises(ValidationError, match="'when' needs an answer"):
        await graph.ainvoke(Command(resume={pending.id: missing_required}), cfg)
    (still,) = (await graph.aget_state(cfg)).interrupts
    assert still.id == pending.id


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ({"type": "choose", "choice": "postgres"}, "choose:postgres"),
        ({"type": "reject", "reason": "neither"}, "reject:neither"),
    ],
)
async def test_ask_human_choice_flow(sides: Sides, decision: dict[str, Any], expected: str) -> None:
    """A choice files a choice request; the chosen option (or the refusal) comes back."""

    def pick(state: AskState) -> dict[str, Any]:
        answer = ask_human("Which database?", options=["sqlite", "postgres"])
        return {"outcome": f"{answer.type}:{answer.choice or answer.reason}"}

    builder = StateGraph(AskState)
    builder.add_node("pick", pick)
    builder.add_edge(START, "pick")
    bridge = LangGraphBridge(
        builder.compile(checkpointer=InMemorySaver()), sides.agent, sides.service.store
    )
    first = await bridge.run({"messages": [], "outcome": ""}, "t-choice")
    (call,) = first.task.pending
    request = await sides.person.get(call.request_id)
    assert request.kind == "choice"
    assert request.options == ("sqlite", "postgres")
    await sides.person.decide(call.request_id, decision)
    resumed = await bridge.resume("t-choice")
    assert resumed is not None
    assert resumed.output["outcome"] == expected


def test_ask_human_needs_questions_or_options() -> None:
    """ask_human refuses to guess which flow is meant."""
    with pytest.raises(ValueError, match="either questions or options"):
        ask_human("what?")  # type: ignore[call-overload]


# -- HumanFeedback --------------------------------------------------------------------------


def _feedback_graph(model: ScriptedModel, feedback: HumanFeedback) -> Any:
    def agent(state: FeedbackState) -> dict[str, Any]:
        reply = model.invoke(state["messages"])
        return {"messages": [reply]}

    builder = StateGraph(FeedbackState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    feedback.add_to(builder)
    return builder.compile(checkpointer=InMemorySaver())


async def _answer(graph: Any, cfg: RunnableConfig, value: dict[str, Any]) -> dict[str, Any]:
    (pending,) = (await graph.aget_state(cfg)).interrupts
    result: dict[str, Any] = await graph.ainvoke(Command(resume={pending.id: value}), cfg)
    return result


async def test_feedback_tool_edit_loops_back_then_approve_ends() -> None:
    """request_human_input goes to the person; edit returns to the agent, approve ends."""
    ask = AIMessage(
        content="", tool_calls=[_call("request_human_input", "h1", questions=["Which env?"])]
    )
    ask_again = AIMessage(
        content="", tool_calls=[_call("request_human_input", "h2", questions=["Ship it?"])]
    )
    model = ScriptedModel(messages=iter([ask, ask_again]))
    feedback = HumanFeedback(tools_node=None)
    assert [t.name for t in feedback.tools] == ["request_human_input"]
    graph = _feedback_graph(model, feedback)
    cfg: RunnableConfig = {"configurable": {"thread_id": "f1"}}
    await graph.ainvoke({"messages": [HumanMessage(content="deploy")]}, cfg)
    (pending,) = (await graph.aget_state(cfg)).interrupts
    assert pending.value["questions"] == [{"id": "q1", "text": "Which env?", "required": False}]

    await _answer(graph, cfg, {"type": "edit", "feedback": "use staging", "answers": {"q1": "stg"}})
    state = await graph.aget_state(cfg)
    messages: list[BaseMessage] = state.values["messages"]
    answered = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "h1")
    assert "use staging" in str(answered.content) and "A: stg" in str(answered.content)
    assert len(state.interrupts) == 1  # the agent ran again and asked again

    result = await _answer(graph, cfg, {"type": "approve"})
    assert result["human_decision"] == "approve"
    assert not (await graph.aget_state(cfg)).interrupts
    assert "Finish the task" in str(result["messages"][-1].content)


async def test_feedback_tool_reject_ends() -> None:
    """A rejected request_human_input ends the run with the reason told to the model."""
    ask = AIMessage(
        content="", tool_calls=[_call("request_human_input", "h1", questions=["Go on?"])]
    )
    graph = _feedback_graph(ScriptedModel(messages=iter([ask])), HumanFeedback(tools_node=None))
    cfg: RunnableConfig = {"configurable": {"thread_id": "f2"}}
    await graph.ainvoke({"messages": [HumanMessage(content="x")]}, cfg)
    result = await _answer(graph, cfg, {"type": "reject", "reason": "too risky"})
    assert result["human_decision"] == "reject"
    assert "too risky" in str(result["messages"][-1].content)
    assert not (await graph.aget_state(cfg)).interrupts


async def test_always_require_feedback_reviews_every_turn() -> None:
    """With always_require_feedback each plain reply goes to the person; edit loops back."""
    model = ScriptedModel(messages=iter(["draft one", "draft two"]))
    feedback = HumanFeedback(
        always_require_feedback=True, enable_feedback_tool=False, tools_node=None
    )
    assert feedback.tools == []
    graph = _feedback_graph(model, feedback)
    cfg: RunnableConfig = {"configurable": {"thread_id": "f3"}}
    await graph.ainvoke({"messages": [HumanMessage(content="write")]}, cfg)
    (pending,) = (await graph.aget_state(cfg)).interrupts
    assert pending.value["context"] == "draft one"

    await _answer(graph, cfg, {"type": "edit", "answers": {"q1": "shorter"}})
    (pending,) = (await graph.aget_state(cfg)).interrupts
    assert pending.value["context"] == "draft two"
    result = await _answer(graph, cfg, {"type": "approve"})
    texts = [str(m.content) for m in result["messages"]]
    assert texts[0] == "write" and texts[1] == "draft one" and texts[-1] == "draft two"
    assert "shorter" in texts[2]
    assert result["human_decision"] == "approve"


async def test_without_always_require_feedback_a_plain_reply_ends() -> None:
    """With only the feedback tool enabled, a reply without tool calls ends the run."""
    graph = _feedback_graph(ScriptedModel(messages=iter(["final"])), HumanFeedback(tools_node=None))
    cfg: RunnableConfig = {"configurable": {"thread_id": "f4"}}
    result = await graph.ainvoke({"messages": [HumanMessage(content="hi")]}, cfg)
    assert result["messages"][-1].content == "final"
    assert not (await graph.aget_state(cfg)).interrupts


def test_feedback_routing_table() -> None:
    """route_agent and route_feedback pick the person, the tools, the agent or the end."""
    feedback = HumanFeedback(always_require_feedback=True)
    plain = {"messages": [AIMessage(content="hi")]}
    tools = {"messages": [AIMessage(content="", tool_calls=[_call("lookup", "t", query="q")])]}
    asks = {"messages": [AIMessage(content="", tool_calls=[_call("request_human_input", "a")])]}
    assert feedback.route_agent(plain) == "human_feedback"
    assert feedback.route_agent(tools) == "tools"
    assert feedback.route_agent(asks) == "human_feedback"
    assert feedback.route_feedback({"human_decision": "edit"}) == "agent"
    assert feedback.route_feedback({"human_decision": "approve"}) == "__end__"
    assert feedback.route_feedback({"human_decision": "reject"}) == "__end__"
    tool_only = HumanFeedback()
    assert tool_only.route_agent(plain) == "__end__"
    with pytest.raises(ValueError, match="nothing would reach the person"):
        HumanFeedback(always_require_feedback=False, enable_feedback_tool=False)


async def test_bridge_answers_the_feedback_node_over_signoff(sides: Sides) -> None:
    """The human_feedback node's questions are filed and an answer loops back to the agent."""
    ask = AIMessage(
        content="", tool_calls=[_call("request_human_input", "h1", questions=["Which env?"])]
    )
    model = ScriptedModel(messages=iter([ask, "deployed to staging"]))
    graph = _feedback_graph(model, HumanFeedback(tools_node=None))
    bridge = LangGraphBridge(graph, sides.agent, sides.service.store)
    first = await bridge.run({"messages": [HumanMessage(content="deploy")]}, "t-fb")
    (call,) = first.task.pending
    await sides.person.decide(call.request_id, {"type": "answer", "answers": {"q1": "staging"}})
    resumed = await bridge.resume("t-fb")
    assert resumed is not None
    assert resumed.task.status == "Completed"
    assert resumed.output["messages"][-1].content == "deployed to staging"


async def test_bridge_works_with_an_in_process_service(tmp_path: Path) -> None:
    """A Service and a principal are enough; the Task's user is that principal."""
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    service = Service(store, bus=LocalBus())
    bridge = LangGraphBridge(
        _agent(_parallel_model(), InMemorySaver()), service, store, principal=AGENT
    )
    first = await bridge.run(_prompt(), "t-local")
    assert isinstance(bridge.backend, LocalBackend)
    assert first.task.user == AGENT.name
    await store.close()


# -- a review that does not allow edit --------------------------------------------------------


@pytest.mark.parametrize("mode", ["per_call", "batched"])
async def test_a_review_without_edit_files_a_call_no_one_can_edit(
    server: Server, tmp_path: Path, mode: Mode
) -> None:
    """Review approve/reject only: not editable, an edit gets 422 (HTTP, CLI), approve resumes."""
    model = ScriptedModel(
        messages=iter(
            [
                AIMessage(content="", tool_calls=[_call("send_email", "e1", to="ann", body="hi")]),
                AIMessage(content="sent"),
            ]
        )
    )
    review: dict[str, bool | InterruptOnConfig] = {
        "send_email": {"allowed_decisions": ["approve", "reject"]}
    }
    graph = create_agent(
        model,
        tools=[send_email],
        middleware=[HumanInTheLoopMiddleware(interrupt_on=review, interrupt_mode=mode)],
        checkpointer=InMemorySaver(),
    )
    assert server.admin_token is not None
    index = SQLiteStore(tmp_path / "index.db")
    await index.open()
    try:
        async with (
            AsyncClient(server.base, agent_token(server)) as agent,
            httpx.AsyncClient(base_url=server.base, headers=bearer(server.admin_token)) as http,
        ):
            bridge = LangGraphBridge(graph, agent, index)
            first = await bridge.run(_prompt(), "t-noedit")
            rid = first.task.pending[0].request_id
            filed = (await http.get(f"{API}/requests/{rid}")).json()
            assert (filed["editable"], filed["allowed_decisions"]) == (False, ["approve", "reject"])

            edit = {"type": "approve", "args": {"to": "eve", "body": "hi"}}
            refused = await http.post(f"{API}/requests/{rid}/decision", json=edit)
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"] == "InvalidDecision"
            command = [
                sys.executable,
                "-m",
                "signoff",
                "approve",
                rid,
                "--args",
                json.dumps(edit["args"]),
                "--server",
                server.base,
                "--token",
                server.admin_token,
            ]
            cli = await asyncio.to_thread(
                subprocess.run,
                command,
                capture_output=True,
                text=True,
                env=server.env,
                timeout=60,
                check=False,
            )
            assert cli.returncode == 3, cli.stderr
            assert cli.stderr.startswith("error: ") and len(cli.stderr.splitlines()) == 1
            assert "may not be edited" in cli.stderr
            assert (await http.get(f"{API}/requests/{rid}")).json()["status"] == "pending"

            approved = await http.post(f"{API}/requests/{rid}/decision", json={"type": "approve"})
            assert approved.status_code == 200, approved.text
            resumed = await bridge.resume("t-noedit", wait=20)
    finally:
        await index.close()
    assert resumed is not None and resumed.task.status == "Completed"
    assert _tool_results(resumed.output)["e1"].content == "sent to ann: hi"
    assert resumed.output["messages"][-1].content == "sent"


@pytest.mark.parametrize("mode", ["per_call", "batched"])
async def test_requests_carry_the_tools_schema_and_a_breaking_edit_is_422(
    sides: Sides, mode: Mode
) -> None:
    """Each middleware call's request carries its tool's schema from the graph's ToolNode; the
    issue's edit (a string made a list) is 422 with the request pending, and a fitting edit
    then resumes the thread."""
    turn = AIMessage(content="", tool_calls=[_call("send_email", "s1", to="ann", body="hi")])
    model = ScriptedModel(messages=iter([turn, AIMessage(content="sent")]))
    graph = _agent(model, InMemorySaver(), mode)
    bridge = LangGraphBridge(graph, sides.agent, sides.service.store)
    first = await bridge.run(_prompt(), "t-schema")
    rid = first.task.pending[0].request_id
    filed = await sides.person.get(rid)
    assert isinstance(filed, ApprovalRequest)
    assert filed.args_schema is not None
    assert filed.args_schema["required"] == ["to", "body"]
    bad = {"type": "approve", "args": {"to": ["a", "b"], "body": "hi"}}
    with pytest.raises(InvalidDecision, match="args/to"):
        await sides.person.decide(rid, bad)
    assert (await sides.person.get(rid)).status == "pending"
    await sides.person.decide(rid, {"type": "approve", "args": {"to": "zoe", "body": "hi"}})
    resumed = await bridge.resume("t-schema", wait=20)
    assert resumed is not None and resumed.task.status == "Completed"
    assert "sent to zoe: hi" in str(_tool_results(resumed.output)["s1"].content)


async def test_a_claimed_call_langgraph_refuses_ends_failed_with_its_reason(sides: Sides) -> None:
    """An edit LangGraph refuses at resume: the claimed call ends failed with why, never run."""
    turn = AIMessage(content="", tool_calls=[_call("send_email", "s1", to="ann", body="hi")])
    graph = _agent(ScriptedModel(messages=iter([turn])), InMemorySaver())
    bridge = LangGraphBridge(graph, sides.agent, sides.service.store)
    bridge.tool_schemas = {}  # filed without the schema (as before args_schema), so it decides
    first = await bridge.run(_prompt(), "t-ref")
    rid = first.task.pending[0].request_id
    # the edit: a string argument made a list, which send_email's schema refuses
    await sides.person.decide(rid, {"type": "approve", "args": {"to": ["a", "b"], "body": "hi"}})

    with pytest.raises(ValidationError):
        await bridge.resume("t-ref")

    request = await sides.agent.get(rid)
    assert request.status == "failed" and isinstance(request, ApprovalRequest)
    assert request.result is not None and request.result.error is not None
    assert request.result.error.startswith("LangGraph did not complete the call: ValidationError")
    assert "Input should be a valid string" in request.result.error
    task = await bridge.task("t-ref")
    assert task is not None and task.status == "Failed"
    state = await graph.aget_state({"configurable": {"thread_id": "t-ref"}})
    assert not [m for m in state.values["messages"] if isinstance(m, ToolMessage)]  # never ran
    actions = [(e.action, e.actor) for e in await sides.service.audit(rid)]
    assert actions[-2:] == [("claim", "agent"), ("fail", "agent")]
