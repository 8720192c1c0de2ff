"""A hosted task's AG-UI stream, in process on SQLite: runs, pauses, decisions, follow-ups."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from signoff.bus.local import LocalBus
from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.domain.tasks import Task, TaskEvent, parse_event_id
from signoff.errors import InvalidRequest, InvalidTransition, NotAllowed
from signoff.integrations.pydantic_ai.human import deferred_human_toolset
from signoff.integrations.pydantic_ai.tasks import TaskRunner
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from signoff.testing import APPROVER
from tests.streaming_models import streaming

POLICY = Policy.from_toml('[tools]\nneed_approval = ["shell"]\n')
BOB = Principal(name="bob", role="approver")


@dataclass
class Model:
    """A scripted model: the first turn's parts, then what it was told; every input seen."""

    first: list[ToolCallPart | TextPart]
    seen: list[list[ModelMessage]] = field(default_factory=list)

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        last = messages[-1]
        told = [
            p.model_response_str() if isinstance(p, ToolReturnPart) else p.model_response()
            for p in last.parts
            if isinstance(p, ToolReturnPart | RetryPromptPart)
        ]
        if told:
            return ModelResponse(parts=[TextPart("told: " + " | ".join(told))])
        return ModelResponse(parts=list(self.first))


def agent_of(model: Model, ran: list[str]) -> Agent[None, str]:
    """An agent on ``model`` with a gated shell tool and the deferred human tools."""
    agent: Agent[None, str] = Agent(streaming(model.respond), toolsets=[deferred_human_toolset()])

    @agent.tool_plain
    def shell(command: str) -> str:
        """Run a shell command."""
        ran.append(command)
        return f"ran {command}"

    return agent


@dataclass
class Host:
    """A runner over a SQLite service, its models by agent name, and what shell ran."""

    service: Service
    runner: TaskRunner
    models: dict[str, Model]
    ran: list[str]


MODELS: dict[str, list[ToolCallPart | TextPart]] = {
    "chat": [TextPart("hello there, friend")],
    "one": [ToolCallPart("shell", {"command": "ls"}, tool_call_id="c1")],
    "two": [
        ToolCallPart("shell", {"command": "make"}, tool_call_id="m1"),
        ToolCallPart("shell", {"command": "test"}, tool_call_id="m2"),
    ],
    "choose": [
        ToolCallPart(
            "human_intervention_request",
            {"prompt": "Which database?", "options": ["PostgreSQL", "SQLite"]},
            tool_call_id="h1",
        )
    ],
}


async def host_on(store_path: Path) -> Host:
    """A started runner for every scripted agent, on the database at ``store_path``."""
    store = SQLiteStore(store_path)
    await store.open()
    service = Service(store, bus=LocalBus(), policy=POLICY, read_file=None)
    models = {name: Model(list(parts)) for name, parts in MODELS.items()}
    ran: list[str] = []
    agents = {name: agent_of(model, ran) for name, model in models.items()}
    runner = TaskRunner(service, agents, base_url="https://signoff.example")
    await runner.start()
    return Host(service, runner, models, ran)


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[Host]:
    """A host on a fresh SQLite database."""
    made = await host_on(tmp_path / "signoff.db")
    yield made
    await made.runner.stop()


def types(events: tuple[TaskEvent, ...] | list[TaskEvent]) -> list[str]:
    """Each event's AG-UI type."""
    return [str(e.data["type"]) for e in events]


def run_of(events: tuple[TaskEvent, ...], number: int) -> list[TaskEvent]:
    """The ``number``-th run (0 first) of the events, from RUN_STARTED to its end."""
    starts = [i for i, e in enumerate(events) if e.data["type"] == "RUN_STARTED"]
    start = starts[number]
    end = next(
        i
        for i in range(start, len(events))
        if events[i].data["type"] in ("RUN_FINISHED", "RUN_ERROR")
    )
    return list(events[start : end + 1])


async def settled(host: Host, task: Task) -> Task:
    """The task once its run stopped."""
    return await host.runner.settle(task.id)


async def ended(host: Host, task: Task) -> Task:
    """The task once a decision made elsewhere let it run on and end."""
    for _ in range(200):
        now = await host.runner.settle(task.id)
        if now.status not in ("Running", "Paused"):
            return now
        await asyncio.sleep(0.02)
    raise AssertionError(f"task {task.id} never ended: {now.status}")


async def test_a_run_streams_its_events_in_order_with_ids(host: Host) -> None:
    """A run: RUN_STARTED, the prompt, the reply in several deltas, RUN_FINISHED; ids ordered."""
    task = await settled(host, await host.runner.begin("chat", "hi", APPROVER, run_id="r1"))
    assert task.status == "Completed"
    assert types(task.events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    started, user, reply = task.events[0].data, task.events[1].data, task.events[4].data
    assert started["threadId"] == task.id and started["runId"] == "r1"
    assert (user["role"], task.events[2].data["delta"]) == ("user", "hi")
    assert reply["role"] == "assistant"
    deltas = [e.data["delta"] for e in task.events[5:8]]
    assert "".join(str(d) for d in deltas) == "hello there, friend"
    finished = task.events[-1].data
    assert finished["result"] == "hello there, friend"
    assert finished["outcome"] == {"type": "success"}
    keys = [parse_event_id(e.id) for e in task.events]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert host.runner.last_event_id(task) == task.events[-1].id


async def test_a_pause_interrupts_with_request_ids_and_a_decision_resumes(host: Host) -> None:
    """Pause: RUN_FINISHED interrupt per request id; approve: signoff.decision, the result."""
    task = await settled(host, await host.runner.begin("one", "list", APPROVER))
    assert task.status == "Paused"
    (call,) = task.pending
    finished = task.events[-1].data
    assert finished["type"] == "RUN_FINISHED"
    outcome: Any = finished["outcome"]
    (asked,) = outcome["interrupts"]
    assert asked["id"] == call.request_id and asked["toolCallId"] == "c1"
    assert (
        asked["reason"] == "tool_call" and asked["message"] == 'Approve shell({"command": "ls"})?'
    )
    request = await host.service.get(call.request_id)
    expires = request.expires_at.isoformat() if request.expires_at else None
    assert asked.get("expiresAt") == expires and "responseSchema" in asked
    ours = asked["metadata"]["signoff"]
    assert ours["url"] == f"https://signoff.example/requests/{call.request_id}"
    assert ours["actions"] == ["approve", "approve_session", "edit", "reject", "respond"]
    assert "TOOL_CALL_START" in types(task.events)
    await host.service.decide(call.request_id, {"type": "approve"}, APPROVER)
    done = await ended(host, task)
    assert done.status == "Completed" and host.ran == ["ls"]
    second = run_of(done.events, 1)
    assert types(second)[:3] == ["RUN_STARTED", "CUSTOM", "TOOL_CALL_RESULT"]
    decision: Any = second[1].data
    assert decision["name"] == "signoff.decision"
    assert decision["value"]["requestId"] == call.request_id
    assert (decision["value"]["status"], decision["value"]["by"]) == ("approved", "alice")
    assert second[2].data["toolCallId"] == "c1" and second[2].data["content"] == "ran ls"
    assert second[-1].data["outcome"] == {"type": "success"}


async def test_a_rejection_reaches_the_model_and_the_run_goes_on(host: Host) -> None:
    """Reject with a reason: nothing runs, the model is told the reason, the task completes."""
    task = await settled(host, await host.runner.begin("one", "list", APPROVER))
    await host.service.decide(
        task.pending[0].request_id, {"type": "reject", "reason": "not today"}, APPROVER
    )
    done = await ended(host, task)
    assert done.status == "Completed" and host.ran == []
    last_input = host.models["one"].seen[-1][-1]
    told = [p for p in last_input.parts if isinstance(p, ToolReturnPart)]
    assert "not today" in told[0].model_response_str()
    result = next(e for e in run_of(done.events, 1) if e.data["type"] == "TOOL_CALL_RESULT")
    assert "not today" in str(result.data["content"])


async def test_follow_sends_everything_once_across_a_pause_decided_by_another(host: Host) -> None:
    """follow(until="rest") spans the pause bob decides; follow(after=id) gives exactly the rest."""
    task = await host.runner.begin("one", "list", APPROVER)
    seen: list[TaskEvent] = []

    async def read() -> None:
        async for event in host.runner.follow(task, None, until="rest"):
            seen.append(event)

    reader = asyncio.create_task(read())
    paused = await settled(host, task)
    await host.service.decide(paused.pending[0].request_id, {"type": "approve"}, BOB)
    await asyncio.wait_for(reader, 10)
    done = await host.service.get_task(task.id)
    assert seen == list(done.events)
    after = done.events[3].id
    rest = [e async for e in host.runner.follow(done, after, until="rest")]
    assert rest == list(done.events[4:])
    first_run = [e async for e in host.runner.follow(done, None, until="run")]
    assert first_run == run_of(done.events, 0)


async def test_a_bad_event_id_is_refused_at_once(host: Host) -> None:
    """follow with an id that is not K-N raises InvalidRequest before any event."""
    task = await settled(host, await host.runner.begin("chat", "hi", APPROVER))
    for bad in ("1", "a-b", "1-2-3", "-1-2", "01-2"):
        with pytest.raises(InvalidRequest):
            host.runner.follow(task, bad, until="rest")


async def test_a_task_found_running_at_restart_ends_in_run_error_with_new_ids(
    tmp_path: Path,
) -> None:
    """A crash mid-run: the next runner stores RUN_STARTED + RUN_ERROR, ids above the lost ones."""
    first = await host_on(tmp_path / "signoff.db")
    gate = asyncio.Event()
    model = first.models["chat"]
    plain = model.respond

    async def stalled(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        plain(messages, info)
        yield "half a"
        await gate.wait()

    first.runner.agents["chat"] = Agent(streaming(plain))
    first.runner.agents["chat"].model.stream_function = stalled  # type: ignore[union-attr]
    task = await first.runner.begin("chat", "hi", APPROVER)
    live: list[TaskEvent] = []
    async for event in first.runner.follow(task, None, until="rest"):
        live.append(event)
        if event.data["type"] == "TEXT_MESSAGE_CONTENT" and event.data.get("delta") == "half a":
            break
    await first.runner.stop()  # the run is cut off; the task stays Running
    assert (await first.service.get_task(task.id)).status == "Running"
    second = await host_on(tmp_path / "signoff.db")
    try:
        failed = await second.service.get_task(task.id)
        assert failed.status == "Failed"
        assert types(failed.events) == ["RUN_STARTED", "RUN_ERROR"]
        newest = max(parse_event_id(e.id) for e in live)
        assert all(parse_event_id(e.id) > newest for e in failed.events)
    finally:
        await second.runner.stop()


async def test_a_follow_up_keeps_the_history(host: Host) -> None:
    """A follow-up on a Completed task runs again, and the model sees the earlier messages."""
    task = await settled(host, await host.runner.begin("chat", "first question", APPROVER))
    with pytest.raises(NotAllowed):
        await host.runner.follow_up(task.id, "mine now", BOB)
    running = await host.runner.follow_up(task.id, "second question", APPROVER, run_id="r2")
    assert running.status == "Running"
    done = await settled(host, running)
    assert done.status == "Completed"
    prompts = [
        p.content
        for m in host.models["chat"].seen[-1]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]
    assert prompts == ["first question", "second question"]
    second = run_of(done.events, 1)
    assert second[0].data["runId"] == "r2" and second[2].data["delta"] == "second question"
    paused = await settled(host, await host.runner.begin("one", "list", APPROVER))
    with pytest.raises(InvalidTransition):
        await host.runner.follow_up(paused.id, "more", APPROVER)


async def test_a_deferred_choice_pauses_and_the_model_gets_the_choice(host: Host) -> None:
    """human_intervention_request (deferred) files a choice; the chosen text is its result."""
    task = await settled(host, await host.runner.begin("choose", "pick", APPROVER))
    assert task.status == "Paused"
    (call,) = task.pending
    request = await host.service.get(call.request_id)
    assert request.kind == "choice"
    outcome: Any = task.events[-1].data["outcome"]
    (asked,) = outcome["interrupts"]
    assert (asked["reason"], asked["message"]) == ("choice", "Which database?")
    assert asked["metadata"]["signoff"]["options"] == ["PostgreSQL", "SQLite"]
    assert asked["metadata"]["signoff"]["actions"] == ["choose"]
    await host.service.decide(call.request_id, {"type": "choose", "choice": "SQLite"}, APPROVER)
    done = await ended(host, task)
    assert done.status == "Completed" and done.output == "told: SQLite"
    decision: Any = run_of(done.events, 1)[1].data
    assert decision["value"]["kind"] == "choice" and decision["value"]["choice"] == "SQLite"


async def test_parallel_calls_make_one_interrupt_with_two_entries(host: Host) -> None:
    """Two gated calls in one turn: one RUN_FINISHED with both request ids."""
    task = await settled(host, await host.runner.begin("two", "build", APPROVER))
    outcome: Any = task.events[-1].data["outcome"]
    ids = [i["id"] for i in outcome["interrupts"]]
    assert ids == [p.request_id for p in task.pending] and len(ids) == 2
    assert types(task.events).count("RUN_FINISHED") == 1


async def test_a_client_named_task_id_is_used_once(host: Host) -> None:
    """begin(task_id=...) names the task; the same id again is InvalidTransition; bad ones 422."""
    task = await settled(host, await host.runner.begin("chat", "hi", APPROVER, task_id="t-1"))
    assert task.id == "t-1" and task.events[0].data["threadId"] == "t-1"
    with pytest.raises(InvalidTransition):
        await host.runner.begin("chat", "again", BOB, task_id="t-1")
    with pytest.raises(InvalidRequest):
        await host.runner.begin("chat", "hi", APPROVER, task_id="no spaces")


async def test_a_function_model_that_cannot_stream_sends_its_answer_whole(host: Host) -> None:
    """A FunctionModel without a stream_function still runs as a task: one CONTENT delta."""
    answer = ModelResponse(parts=[TextPart("whole answer")])
    host.runner.agents["plain"] = Agent(FunctionModel(lambda messages, info: answer))
    task = await settled(host, await host.runner.begin("plain", "hi", APPROVER))
    assert task.status == "Completed" and task.output == "whole answer"
    reply = [e.data["delta"] for e in task.events[4:] if e.data["type"] == "TEXT_MESSAGE_CONTENT"]
    assert reply == ["whole answer"]


async def test_a_run_end_reaches_a_follower_once_the_task_is_stored_as_it_ended(
    host: Host,
) -> None:
    """A follower that reads RUN_FINISHED finds the task Paused (or Completed) at once, so a
    client may answer the interrupt or send its next message as soon as it sees the end."""
    for agent, status in (("one", "Paused"), ("chat", "Completed")):
        task = await host.runner.begin(agent, "go", APPROVER)
        async for event in host.runner.follow(task, None, until="run"):
            if event.data["type"] == "RUN_FINISHED":
                stored = await host.service.get_task(task.id)
                assert (stored.status, stored.events[-1]) == (status, event), agent


async def test_only_signoffs_own_human_tools_are_not_gated(tmp_path: Path) -> None:
    """With no tools.toml (every tool gated), the deferred choice files its choice alone;
    another toolset's tool that takes its name is gated as an approval, as any tool."""
    store = SQLiteStore(tmp_path / "signoff.db")
    await store.open()
    service = Service(store, bus=LocalBus(), policy=Policy([]), read_file=None)
    ours = Model(list(MODELS["choose"]))
    theirs: Agent[None, str] = Agent(streaming(Model(list(MODELS["choose"])).respond))

    @theirs.tool_plain
    def human_intervention_request(prompt: str, options: list[str]) -> str:
        """A tool of the agent's own that happens to share the name."""
        return options[0]

    runner = TaskRunner(service, {"ours": agent_of(ours, []), "theirs": theirs})
    await runner.start()
    try:
        for name, kind in (("ours", "choice"), ("theirs", "approval")):
            task = await runner.settle((await runner.begin(name, "pick", APPROVER)).id)
            assert task.status == "Paused", task.error
            (call,) = task.pending
            assert call.tool_name == "human_intervention_request"
            assert (await service.get(call.request_id)).kind == kind, name
    finally:
        await runner.stop()
