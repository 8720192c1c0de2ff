"""Real pydantic-ai agents on FunctionModel scripts, gated by signoff in process and over HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from signoff.backends import Backend
from signoff.domain.policies import Policy
from signoff.domain.requests import ApprovalRequest, Request
from signoff.errors import InvalidDecision, InvalidRequest
from signoff.executor import Executor
from signoff.integrations.pydantic_ai import (
    SignoffGate,
    checked_results,
    queue_status_toolset,
    registry_from_agent,
    resolve_deferred,
    run_with_signoff,
)
from signoff.integrations.pydantic_ai import gate as pydantic_ai_integration
from signoff.service import Service
from signoff.store.base import RequestQuery
from signoff.store.sqlite import SQLiteStore
from signoff.testing import APPROVER
from tests.integrations.conftest import Sides
from tests.streaming_models import streaming

ASK_ALL = Policy.from_toml('[tools]\nneed_approval = ["*"]\n')


def script(*calls: ToolCallPart) -> FunctionModel:
    """A model that makes ``calls`` in one turn, then reports every tool return it got."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            p
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if not returns:
            return ModelResponse(parts=list(calls))
        lines = [f"{p.tool_name}[{p.tool_call_id}]={p.model_response_str()}" for p in returns]
        return ModelResponse(parts=[TextPart("\n".join(lines))])

    return streaming(respond)


def tool_agent(model: FunctionModel, ran: list[tuple[str, dict[str, Any]]]) -> Agent[None, str]:
    """An agent with write_file, shell and delete tools that record what they ran."""
    agent: Agent[None, str] = Agent(model)

    @agent.tool_plain
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        ran.append(("write_file", {"path": path, "content": content}))
        return f"wrote {len(content)} bytes to {path}"

    @agent.tool_plain
    def shell(command: str, timeout: int = 10) -> str:
        """Run a shell command."""
        ran.append(("shell", {"command": command, "timeout": timeout}))
        return f"ran {command}"

    @agent.tool_plain
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(("delete", {"path": path}))
        return f"deleted {path}"

    return agent


async def pending(person: Backend, count: int) -> list[Request]:
    """Wait until ``count`` requests are pending; oldest first."""
    for _ in range(500):
        page = await person.list_requests(RequestQuery(status="pending", limit=50))
        if len(page.items) >= count:
            return sorted(page.items, key=lambda r: r.created_at)
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} pending requests")


def decider(
    person: Backend, count: int, decide: Callable[[Request], dict[str, Any]]
) -> asyncio.Task[list[Request]]:
    """A person deciding ``count`` requests as they appear, from another task."""

    async def go() -> list[Request]:
        requests = await pending(person, count)
        return [await person.decide(r.id, decide(r)) for r in requests]

    return asyncio.create_task(go())


def by_tool(decisions: dict[str, dict[str, Any]]) -> Callable[[Request], dict[str, Any]]:
    """Decide each request by its tool name."""
    return lambda r: decisions[getattr(r, "tool_name", "")]


async def test_three_parallel_calls_approved_edited_and_rejected(sides: Sides) -> None:
    """Approve, edit and reject in one pause: the edit runs as edited, the rejection never runs."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = tool_agent(
        script(
            ToolCallPart("write_file", {"path": "a.txt", "content": "hi"}, tool_call_id="c1"),
            ToolCallPart("shell", {"command": "rm -rf /"}, tool_call_id="c2"),
            ToolCallPart("delete", {"path": "old.log"}, tool_call_id="c3"),
        ),
        ran,
    )
    person = decider(
        sides.person,
        3,
        by_tool(
            {
                "write_file": {"type": "approve"},
                "shell": {"type": "approve", "args": {"command": "ls", "timeout": 5}},
                "delete": {"type": "reject", "reason": "keep the logs"},
            }
        ),
    )
    result = await run_with_signoff(
        agent, "go", signoff=sides.agent, session_id="s1", policy=ASK_ALL, timeout=30
    )
    await person
    assert sorted(ran, key=lambda r: r[0]) == [
        ("shell", {"command": "ls", "timeout": 5}),
        ("write_file", {"path": "a.txt", "content": "hi"}),
    ]
    text = result.output
    assert isinstance(text, str)
    assert "write_file[c1]=wrote 2 bytes to a.txt" in text
    assert "ran ls" in text and 'instead of {"command": "rm -rf /"}' in text
    assert "delete[c3]=A person rejected this call: keep the logs" in text
    page = await sides.person.list_requests(RequestQuery(limit=10))
    statuses = {getattr(r, "tool_name", ""): r.status for r in page.items}
    assert statuses == {"write_file": "completed", "shell": "completed", "delete": "rejected"}


async def test_requests_carry_the_tools_schema_and_a_breaking_edit_is_refused(
    sides: Sides,
) -> None:
    """Deferred and blocking calls carry the tool's args_schema; an edit breaking it is 422 and
    the call stays pending until a fitting edit runs."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = tool_agent(script(ToolCallPart("shell", {"command": "ls"}, tool_call_id="c1")), ran)

    async def decide() -> None:
        request = (await pending(sides.person, 1))[0]
        assert isinstance(request, ApprovalRequest)
        assert request.args_schema is not None
        assert request.args_schema["properties"] == {
            "command": {"type": "string"},
            "timeout": {"default": 10, "type": "integer"},
        }
        bad = {"command": "ls", "timeout": "x"}
        with pytest.raises(InvalidDecision, match="args/timeout"):
            await sides.person.decide(request.id, {"type": "approve", "args": bad})
        assert (await sides.person.get(request.id)).status == "pending"
        edit = {"command": "ls", "timeout": 5}
        await sides.person.decide(request.id, {"type": "approve", "args": edit})

    for gate_mode in ("defer", "block"):
        person = asyncio.create_task(decide())
        if gate_mode == "defer":
            await run_with_signoff(
                agent, "go", signoff=sides.agent, session_id="s1", policy=ASK_ALL, timeout=30
            )
        else:
            gate = SignoffGate(sides.agent, session_id="s2", mode="block", policy=ASK_ALL)
            await agent.run("go", capabilities=[gate])
        await person
    assert ran == [("shell", {"command": "ls", "timeout": 5})] * 2


async def test_invalid_edited_args_never_reach_pydantic_ai(
    sides: Sides, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Edited args that break the tool's schema, on a request filed without it, are refused
    at resume: the tool never runs, it is failed."""
    monkeypatch.setattr(pydantic_ai_integration, "tool_schemas", lambda agent: {})
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = tool_agent(script(ToolCallPart("shell", {"command": "ls"}, tool_call_id="c1")), ran)
    person = decider(
        sides.person, 1, lambda r: {"type": "approve", "args": {"command": "ls", "timeout": "x"}}
    )
    result = await run_with_signoff(
        agent, "go", signoff=sides.agent, session_id="s1", policy=ASK_ALL, timeout=30
    )
    decided = (await person)[0]
    assert ran == []
    assert "edited arguments the tool does not accept (timeout:" in result.output
    final = await sides.person.get(decided.id)
    assert final.status == "failed"


async def test_respond_gives_the_model_the_persons_text(sides: Sides) -> None:
    """A respond decision returns the person's text on the call's own id, in place of running."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = tool_agent(script(ToolCallPart("shell", {"command": "make"}, tool_call_id="c9")), ran)
    person = decider(sides.person, 1, lambda r: {"type": "respond", "feedback": "use ninja"})
    result = await run_with_signoff(
        agent, "go", signoff=sides.agent, session_id="s1", policy=ASK_ALL, timeout=30
    )
    await person
    assert ran == [] and result.output == "shell[c9]=use ninja"


async def test_policy_decides_which_tools_are_gated(sides: Sides) -> None:
    """Allowed tools run without asking, denied ones never run, requires_approval always asks."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = tool_agent(
        script(
            ToolCallPart("write_file", {"path": "a", "content": "x"}, tool_call_id="w"),
            ToolCallPart("delete", {"path": "b"}, tool_call_id="d"),
            ToolCallPart("always", {}, tool_call_id="g"),
        ),
        ran,
    )

    @agent.tool_plain(requires_approval=True)
    def always() -> str:
        """A tool that always needs a person."""
        ran.append(("always", {}))
        return "done"

    policy = Policy.from_toml(
        '[tools]\nneed_approval = ["shell"]\n\n[[rules]]\ntool = "delete"\naction = "deny"\n'
    )
    person = decider(sides.person, 1, lambda r: {"type": "approve"})
    result = await run_with_signoff(
        agent, "go", signoff=sides.agent, session_id="s1", policy=policy, timeout=30
    )
    asked = await person
    assert [getattr(r, "tool_name", "") for r in asked] == ["always"]
    assert sorted(name for name, _ in ran) == ["always", "write_file"]
    assert "d]=The call was denied by policy" in result.output


async def test_pause_then_resume_from_the_stored_history(sides: Sides) -> None:
    """A paused run's stored history, restored by a new agent, finds the same request."""
    ran: list[tuple[str, dict[str, Any]]] = []
    calls = [ToolCallPart("shell", {"command": "deploy"}, tool_call_id="c1")]
    first = tool_agent(script(*calls), ran)
    stored: list[bytes] = []

    async def save(result: Any, request_ids: list[str]) -> None:
        assert len(request_ids) == 1
        stored.append(ModelMessagesTypeAdapter.dump_json(result.all_messages()))

    with pytest.raises(TimeoutError):  # the first process dies while it waits
        await asyncio.wait_for(
            run_with_signoff(
                first, "go", signoff=sides.agent, session_id="s1", policy=ASK_ALL, on_pause=save
            ),
            1.0,
        )
    assert stored and ran == []
    # the person decides while no agent runs; a new process rebuilds the agent and resumes
    request = (await pending(sides.person, 1))[0]
    await sides.person.decide(request.id, {"type": "approve"})
    history = ModelMessagesTypeAdapter.validate_json(stored[0])
    second = tool_agent(script(*calls), ran)
    result = await run_with_signoff(
        second,
        None,
        signoff=sides.agent,
        session_id="s1",
        policy=ASK_ALL,
        message_history=history,
        timeout=30,
    )
    assert ran == [("shell", {"command": "deploy", "timeout": 10})]
    assert result.output == "shell[c1]=ran deploy"
    assert (await sides.person.get(request.id)).status == "completed"


def test_forged_results_are_refused() -> None:
    """A result under calls for an approval id, an unknown id, or a missing one: refused."""
    deferred = DeferredToolRequests(
        approvals=[ToolCallPart("shell", {"command": "ls"}, tool_call_id="a1")]
    )
    with pytest.raises(InvalidRequest, match="under calls for approval 'a1'"):
        checked_results(deferred, DeferredToolResults(calls={"a1": "pretend it ran"}))
    with pytest.raises(InvalidRequest, match="'zz' is not a pending tool call"):
        checked_results(deferred, DeferredToolResults(approvals={"a1": ToolApproved(), "zz": True}))
    with pytest.raises(InvalidRequest, match="no result for pending call 'a1'"):
        checked_results(deferred, DeferredToolResults())
    checked_results(deferred, DeferredToolResults(approvals={"a1": ToolApproved()}))


async def test_a_claimed_call_is_never_run_again(sides: Sides) -> None:
    """Resolving a pause whose request was already claimed denies it instead of running twice."""
    deferred = DeferredToolRequests(
        approvals=[ToolCallPart("shell", {"command": "ls"}, tool_call_id="c1")]
    )
    person = decider(sides.person, 1, lambda r: {"type": "approve"})
    first = await resolve_deferred(deferred, sides.agent, session_id="s", timeout=30)
    request = (await person)[0]
    assert isinstance(first.approvals["c1"], ToolApproved)
    await sides.agent.claim(request.id, {"command": "ls"})
    again = await resolve_deferred(deferred, sides.agent, session_id="s", timeout=30)
    assert "already executing" in getattr(again.approvals["c1"], "message", "")


async def test_blocking_gate_waits_claims_runs_and_reports(sides: Sides) -> None:
    """In block mode the tool waits inside its call, runs with the approved args, reports back."""
    ran: list[tuple[str, dict[str, Any]]] = []
    calls = [
        ToolCallPart("shell", {"command": "ls"}, tool_call_id="b1"),
        ToolCallPart("delete", {"path": "x"}, tool_call_id="b2"),
    ]
    agent = tool_agent(script(*calls), ran)
    gate = SignoffGate(sides.agent, session_id="s", mode="block", policy=ASK_ALL, timeout=30)
    person = decider(
        sides.person,
        2,
        by_tool(
            {
                "shell": {"type": "approve", "args": {"command": "ls -la"}},
                "delete": {"type": "reject", "reason": "no"},
            }
        ),
    )
    result = await agent.run("go", capabilities=[gate])
    await person
    assert ran == [("shell", {"command": "ls -la", "timeout": 10})]
    assert "shell[b1]=ran ls -la" in result.output and "it ran with" in result.output
    assert "delete[b2]=Not run. A person rejected this call: no" in result.output


async def test_blocking_gate_times_out_closed(sides: Sides) -> None:
    """No decision within the timeout: the request is withdrawn and the tool does not run."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = tool_agent(script(ToolCallPart("shell", {"command": "ls"}, tool_call_id="t")), ran)
    gate = SignoffGate(sides.agent, session_id="s", mode="block", policy=ASK_ALL, timeout=0.2)
    result = await agent.run("go", capabilities=[gate])
    assert ran == [] and "No decision came in time" in result.output
    page = await sides.person.list_requests(RequestQuery(limit=5))
    assert [r.status for r in page.items] == ["canceled"]


async def test_queue_mode_returns_pending_at_once_and_status_later(sides: Sides) -> None:
    """In queue mode the tool returns [PENDING:<id>] without running; signoff_status tells more."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = tool_agent(script(ToolCallPart("shell", {"command": "ls"}, tool_call_id="q")), ran)
    gate = SignoffGate(sides.agent, session_id="s", mode="queue", policy=ASK_ALL)
    result = await agent.run("go", capabilities=[gate])
    assert ran == []
    text = result.output
    assert text.startswith("shell[q]=[PENDING:req_")
    request_id = text.split("[PENDING:", 1)[1].split("]", 1)[0]
    await sides.person.decide(request_id, {"type": "reject", "reason": "not now"})
    toolset = queue_status_toolset(sides.agent)
    status_agent: Agent[None, str] = Agent(
        FunctionModel(status_script(request_id)), toolsets=[toolset]
    )
    answer = await status_agent.run("status?")
    assert json.loads(answer.output) == {
        request_id: "rejected: A person rejected this call: not now. It was not run."
    }


def status_script(request_id: str) -> Callable[[list[ModelMessage], AgentInfo], ModelResponse]:
    """Ask signoff_status about one id, then echo its answer."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            p
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if returns:
            return ModelResponse(parts=[TextPart(returns[0].model_response_str())])
        return ModelResponse(parts=[ToolCallPart("signoff_status", {"ids": [request_id]})])

    return respond


AGENT_PROCESS = """
import asyncio, os, sys
from pathlib import Path
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.messages import ModelRequest, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from signoff import Principal, Service, SQLiteStore
from signoff.backends import LocalBackend
from signoff.domain.policies import Policy
from signoff.integrations.pydantic_ai import run_with_signoff

mode, db, saved = sys.argv[1], sys.argv[2], Path(sys.argv[3])

def respond(messages, info):
    returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(returns[0].model_response_str())])
    return ModelResponse(parts=[ToolCallPart("shell", {"command": "deploy"}, tool_call_id="c1")])

agent = Agent(FunctionModel(respond))

@agent.tool_plain
def shell(command: str) -> str:
    return f"ran {command} in process {os.getpid()}"

async def main():
    policy = Policy.from_toml('[tools]\\nneed_approval = ["*"]\\n')
    async with Service(SQLiteStore(db)) as service:
        backend = LocalBackend(service, Principal(name="agent", role="agent"))
        if mode == "pause":
            async def die(result, ids):
                saved.write_bytes(ModelMessagesTypeAdapter.dump_json(result.all_messages()))
                print(ids[0], flush=True)
                os._exit(0)  # the process dies while it waits, as a crash would
            await run_with_signoff(agent, "go", signoff=backend, session_id="s1",
                                   policy=policy, on_pause=die)
        else:
            history = ModelMessagesTypeAdapter.validate_json(saved.read_bytes())
            result = await run_with_signoff(agent, None, signoff=backend, session_id="s1",
                                            policy=policy, message_history=history, timeout=30)
            print(result.output)

asyncio.run(main())
"""


async def test_pause_in_one_process_resume_in_another(tmp_path: Path) -> None:
    """One process pauses and dies; a person decides; another process resumes and runs it once."""
    script_path = tmp_path / "agent_process.py"
    script_path.write_text(AGENT_PROCESS)
    db = str(tmp_path / "signoff.db")
    saved = str(tmp_path / "history.json")

    def agent_process(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script_path), mode, db, saved],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    paused = await asyncio.to_thread(agent_process, "pause")
    assert paused.returncode == 0, paused.stderr
    request_id = paused.stdout.strip()
    async with Service(SQLiteStore(db)) as service:
        assert (await service.get(request_id)).status == "pending"
        await service.decide(request_id, {"type": "approve"}, APPROVER)
    resumed = await asyncio.to_thread(agent_process, "resume")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("ran deploy in process ")
    async with Service(SQLiteStore(db)) as service:
        final = await service.get(request_id)
        assert final.status == "completed"
        page = await service.list_requests(RequestQuery(limit=10))
        assert [r.id for r in page.items] == [request_id]  # asked again, found the same one


async def test_queue_mode_runs_each_approved_operation_once_with_two_workers(sides: Sides) -> None:
    """Queued calls run only after approval, each exactly once though two workers race for it."""
    ran: list[tuple[str, dict[str, Any]]] = []
    calls = [ToolCallPart("shell", {"command": f"job {n}"}, tool_call_id=f"j{n}") for n in range(8)]
    agent = tool_agent(script(*calls), ran)
    gate = SignoffGate(sides.agent, session_id="q", mode="queue", policy=ASK_ALL)
    result = await agent.run("go", capabilities=[gate])
    assert ran == [] and result.output.count("[PENDING:req_") == 8
    queued = await pending(sides.person, 8)
    for request in queued:  # filed concurrently, so in no particular order
        job = int(getattr(request, "tool_args", {})["command"].split()[1])
        decision = {"type": "approve"} if job < 6 else {"type": "reject", "reason": "no"}
        await sides.person.decide(request.id, decision)
    registry = registry_from_agent(agent)
    assert {"shell", "write_file", "delete"} <= set(registry)
    first, second = Executor(sides.agent, registry), Executor(sides.agent, registry)
    counts = await asyncio.gather(first.run_once(), second.run_once(), first.run_once())
    assert sum(counts) == 6
    assert sorted(args["command"] for _, args in ran) == [f"job {n}" for n in range(6)]
    page = await sides.person.list_requests(RequestQuery(session_id="q", limit=20))
    assert sorted(r.status for r in page.items) == ["completed"] * 6 + ["rejected"] * 2


async def test_a_run_cancelled_during_a_claimed_call_reports_it_failed(sides: Sides) -> None:
    """Cancelling the run while an approved call runs leaves it failed, not executing."""
    started = asyncio.Event()
    agent: Agent[None, str] = Agent(script(ToolCallPart("deploy", {}, tool_call_id="d1")))

    @agent.tool_plain
    async def deploy() -> str:
        """Deploy (takes a while)."""
        started.set()
        await asyncio.sleep(60)
        return "deployed"

    gate = SignoffGate(sides.agent, session_id="s", mode="block", policy=ASK_ALL, timeout=30)
    run = asyncio.create_task(agent.run("go", capabilities=[gate]))
    (request,) = await pending(sides.person, 1)
    await sides.person.decide(request.id, {"type": "approve"})
    await asyncio.wait_for(started.wait(), 15)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    ended = await sides.agent.get(request.id)
    assert ended.status == "failed" and isinstance(ended, ApprovalRequest)
    assert ended.result is not None and ended.result.error is not None
    assert "cancelled during the call" in ended.result.error
