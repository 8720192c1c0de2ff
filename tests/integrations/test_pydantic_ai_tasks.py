"""Hosted agent runs over the HTTP API, in process: pause, persist, resume by request id."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from signoff.bus.local import LocalBus
from signoff.domain.policies import Policy
from signoff.domain.principals import Principal
from signoff.server.app import API, create_app
from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from signoff.testing import APPROVER
from tests.integrations.test_pydantic_ai import script, tool_agent
from tests.streaming_models import streaming

POLICY = Policy.from_toml(
    '[tools]\nneed_approval = ["shell", "delete", "write_file"]\n\n'
    '[[rules]]\ntool = "write_file"\nargs = { path = "/etc/*" }\naction = "deny"\n'
)


@dataclass
class Hosted:
    """A server hosting agents, clients for two people, and what the tools ran."""

    service: Service
    alice: httpx.AsyncClient
    bob: httpx.AsyncClient
    ran: list[tuple[str, dict[str, Any]]]


def agents(ran: list[tuple[str, dict[str, Any]]]) -> dict[str, Agent[None, str]]:
    """A one-call agent, a three-call agent and one that needs nobody."""
    one = tool_agent(script(ToolCallPart("shell", {"command": "ls"}, tool_call_id="c1")), ran)
    three = tool_agent(
        script(
            ToolCallPart("shell", {"command": "make"}, tool_call_id="m1"),
            ToolCallPart("delete", {"path": "old.log"}, tool_call_id="m2"),
            ToolCallPart("write_file", {"path": "a.txt", "content": "x"}, tool_call_id="m3"),
        ),
        ran,
    )
    quiet: Agent[None, str] = Agent(
        streaming(lambda messages, info: ModelResponse(parts=[TextPart("nothing to do")]))
    )
    return {"one": one, "three": three, "quiet": quiet}


@pytest.fixture
async def hosted(tmp_path: Path) -> AsyncIterator[Hosted]:
    """create_app(service, agents=...) on SQLite, its runner started as serve would."""
    store = SQLiteStore(tmp_path / "signoff.db")
    await store.open()
    service = Service(store, bus=LocalBus(), policy=POLICY, read_file=None)
    ran: list[tuple[str, dict[str, Any]]] = []
    app = create_app(service, sweep=False, agents=agents(ran))
    await app.state.tasks.start()
    alice_token, _ = await service.create_token(APPROVER.name, APPROVER.role)
    bob_token, _ = await service.create_token("bob", "approver")
    transport = httpx.ASGITransport(app=app)

    def client(token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=transport,
            base_url="http://signoff.test",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    async with client(alice_token) as alice, client(bob_token) as bob:
        yield Hosted(service, alice, bob, ran)
    await app.state.tasks.stop()
    await store.close()


async def start(client: httpx.AsyncClient, agent: str) -> dict[str, Any]:
    """POST a run; its JSON."""
    response = await client.post(f"{API}/agents/{agent}/runs", json={"prompt": "go"})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_run_that_needs_nobody_completes_at_once(hosted: Hosted) -> None:
    """No gated call: the run returns Completed with the output."""
    task = await start(hosted.alice, "quiet")
    assert task["status"] == "Completed" and task["output"] == "nothing to do"
    assert (await hosted.alice.get(f"{API}/agents")).json() == {"items": ["one", "quiet", "three"]}


async def test_pause_then_approve_by_resume(hosted: Hosted) -> None:
    """A gated call pauses with its request and URLs; approve runs it and completes the task."""
    paused = await start(hosted.alice, "one")
    assert paused["status"] == "Paused" and hosted.ran == []
    request_id = paused["request_id"]
    assert paused["task_id"].startswith("task_") and paused["session_id"]
    assert paused["approval_url"].endswith(f"/api/v1/resume/{request_id}?action=approve")
    assert paused["rejection_url"].endswith(f"/api/v1/resume/{request_id}?action=reject")
    assert paused["tool_calls"] == [
        {
            "tool_call_id": "c1",
            "tool_name": "shell",
            "args": {"command": "ls"},
            "request_id": request_id,
        },
    ]
    assert "shell" in paused["message"]
    done = await hosted.alice.post(f"{API}/resume/{request_id}", json={"action": "approve"})
    assert done.status_code == 200, done.text
    task = done.json()
    assert task["status"] == "Completed" and task["output"] == "shell[c1]=ran ls"
    assert hosted.ran == [("shell", {"command": "ls", "timeout": 10})]
    kinds = [(i["kind"], i.get("by")) for i in task["history"]]
    assert kinds[:2] == [("user", None), ("tool_call", None)]
    assert ("approval", "alice") in kinds and ("tool_result", None) in kinds
    assert kinds[-1] == ("assistant", None)
    again = await hosted.alice.post(f"{API}/resume/{request_id}", json={"action": "approve"})
    assert again.status_code == 409  # not paused any more; the tool ran once
    assert len(hosted.ran) == 1
    read = await hosted.alice.get(f"{API}/tasks/{task['task_id']}")
    assert read.json()["status"] == "Completed"


async def test_reject_tells_the_model_and_records_who(hosted: Hosted) -> None:
    """Reject runs nothing; the model is told the reason and the run completes."""
    paused = await start(hosted.alice, "one")
    rejected = await hosted.alice.post(
        f"{API}/resume/{paused['request_id']}", json={"action": "reject", "reason": "not today"}
    )
    assert rejected.status_code == 200, rejected.text
    body = await hosted.alice.post(
        f"{API}/resume/{paused['request_id']}", json={"action": "reject", "reason": "x"}
    )
    assert body.status_code == 409
    task = rejected.json()
    assert task["status"] == "Completed" and hosted.ran == []
    assert "rejected this call: not today" in task["output"]
    assert next(i for i in task["history"] if i["kind"] == "rejection")["by"] == "alice"


async def test_edit_runs_the_edited_args(hosted: Hosted) -> None:
    """An edit action runs the call with the person's arguments."""
    paused = await start(hosted.alice, "one")
    done = await hosted.alice.post(
        f"{API}/resume/{paused['request_id']}",
        json={"action": "edit", "args": {"command": "ls -la"}},
    )
    assert done.json()["status"] == "Completed"
    assert hosted.ran == [("shell", {"command": "ls -la", "timeout": 10})]
    assert any(i["kind"] == "edit" for i in done.json()["history"])


async def test_errors_404_403_409(hosted: Hosted) -> None:
    """Unknown request 404; another person 403; a task not paused 409; bad input 422."""
    missing = await hosted.alice.post(f"{API}/resume/req_nope", json={"action": "approve"})
    assert missing.status_code == 404
    paused = await start(hosted.alice, "one")
    foreign = await hosted.bob.post(
        f"{API}/resume/{paused['request_id']}", json={"action": "approve"}
    )
    assert foreign.status_code == 403 and hosted.ran == []
    bad = await hosted.alice.post(f"{API}/resume/{paused['request_id']}", json={"action": "x"})
    assert bad.status_code == 422
    unknown_agent = await hosted.alice.post(f"{API}/agents/nobody/runs", json={"prompt": "go"})
    assert unknown_agent.status_code == 404
    await hosted.alice.post(f"{API}/resume/{paused['request_id']}", json={"action": "approve"})
    late = await hosted.alice.post(
        f"{API}/resume/{paused['request_id']}", json={"action": "reject", "reason": "late"}
    )
    assert late.status_code == 409


async def test_several_calls_resume_when_all_are_decided(hosted: Hosted) -> None:
    """Each call has its own request; approved ones run, a rejected one reaches the model."""
    paused = await start(hosted.alice, "three")
    calls = {c["tool_name"]: c["request_id"] for c in paused["tool_calls"]}
    assert set(calls) == {"shell", "delete", "write_file"}
    first = await hosted.alice.post(f"{API}/resume/{calls['shell']}", json={"action": "approve"})
    assert first.json()["status"] == "Paused" and hosted.ran == []
    # a decision from the inbox or CLI (no resume call) counts the same
    await hosted.service.decide(
        calls["delete"],
        {"type": "reject", "reason": "keep it"},
        Principal(name="carol", role="approver"),
    )
    done = await hosted.alice.post(
        f"{API}/resume/{calls['write_file']}", json={"action": "approve"}
    )
    task = done.json()
    assert task["status"] == "Completed", task
    assert sorted(name for name, _ in hosted.ran) == ["shell", "write_file"]
    assert "delete[m2]=A person rejected this call: keep it" in task["output"]
    decided_by = {i["tool_name"]: i["by"] for i in task["history"] if i["request_id"]}
    assert decided_by == {"shell": "alice", "delete": "carol", "write_file": "alice"}


async def test_a_respond_continues_a_run_nobody_approved_anything_in(hosted: Hosted) -> None:
    """A respond is an answer to the model: rejected and responded calls reach it, no cancel."""
    paused = await start(hosted.alice, "three")
    calls = {c["tool_name"]: c["request_id"] for c in paused["tool_calls"]}
    person = Principal(name="carol", role="approver")
    await hosted.service.decide(calls["shell"], {"type": "reject", "reason": "no"}, person)
    await hosted.service.decide(calls["delete"], {"type": "respond", "feedback": "ask ops"}, person)
    done = await hosted.alice.post(
        f"{API}/resume/{calls['write_file']}", json={"action": "reject", "reason": "later"}
    )
    task = done.json()
    assert task["status"] == "Completed", task
    assert hosted.ran == []
    assert "delete[m2]=ask ops" in task["output"]
    assert "A person rejected this call: later" in task["output"]


async def test_an_inbox_decision_alone_resumes_the_task(hosted: Hosted) -> None:
    """Approving the request anywhere (no resume call) runs the task on to Completed."""
    paused = await start(hosted.alice, "one")
    await hosted.service.decide(paused["request_id"], {"type": "approve"}, APPROVER)
    for _ in range(200):
        task = (await hosted.alice.get(f"{API}/tasks/{paused['task_id']}")).json()
        if task["status"] == "Completed":
            break
        await asyncio.sleep(0.02)
    assert task["status"] == "Completed" and len(hosted.ran) == 1


async def test_policy_denied_calls_are_recorded_and_never_run(hosted: Hosted) -> None:
    """A call the policy denies is filed, rejected by policy, and reaches the model as a denial."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = tool_agent(
        script(
            ToolCallPart("write_file", {"path": "/etc/passwd", "content": ""}, tool_call_id="w")
        ),
        ran,
    )
    from signoff.integrations.pydantic_ai.tasks import TaskRunner

    runner = TaskRunner(hosted.service, {"w": agent})
    task = await runner.run("w", "go", APPROVER)
    assert task.status == "Completed" and ran == []
    assert task.output is not None and "denied by policy" in str(task.output)


async def test_without_agents_the_task_endpoints_say_so(tmp_path: Path) -> None:
    """A server hosting no agents answers 404 with how to register one."""
    service = Service(SQLiteStore(tmp_path / "x.db"), bus=LocalBus(), read_file=None)
    await service.open()
    token, _ = await service.create_token("alice", "approver")
    app = create_app(service, sweep=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://t",
        headers={"Authorization": f"Bearer {token}"},
    ) as http:
        response = await http.post(f"{API}/agents/a/runs", json={"prompt": "go"})
        assert response.status_code == 404 and "--agent" in response.json()["detail"]
        assert (await http.get(f"{API}/agents")).json() == {"items": []}
    await service.close()


async def test_an_approver_the_policy_names_may_resume_another_users_task(tmp_path: Path) -> None:
    """The task's user or a designated approver may resume; another approver gets 403."""
    from signoff.errors import NotAllowed
    from signoff.integrations.pydantic_ai.tasks import TaskRunner

    policy = Policy.from_toml(
        '[tools]\nneed_approval = ["*"]\n\n[governance]\napprovers = ["bob"]\n'
    )
    service = Service(SQLiteStore(tmp_path / "g.db"), bus=LocalBus(), policy=policy, read_file=None)
    await service.open()
    ran: list[tuple[str, dict[str, Any]]] = []
    runner = TaskRunner(service, agents(ran))
    paused = await runner.run("one", "go", Principal(name="alice", role="approver"))
    request_id = paused.pending[0].request_id
    with pytest.raises(NotAllowed):
        await runner.resume(request_id, "approve", Principal(name="carol", role="approver"))
    done = await runner.resume(request_id, "approve", Principal(name="bob", role="approver"))
    assert done.status == "Completed" and len(ran) == 1
    await service.close()
