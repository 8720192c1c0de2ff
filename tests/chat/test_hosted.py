"""The hosted demo chat agent: a real TaskRunner runs it over a real service, no API key."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip(
    "pydantic_ai", reason="needs the pydantic-ai extra: pip install 'signoff[pydantic-ai]'"
)

from pydantic_ai import (
    DeferredToolRequests,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.agent import AgentRunResult

from signoff.bus.local import LocalBus
from signoff.chat.hosted import ENV_WORKSPACE, build_hosted_agent
from signoff.domain.policies import Policy
from signoff.integrations.pydantic_ai.tasks import TaskRunner
from signoff.service import Service
from signoff.store.memory import MemoryStore
from signoff.testing import APPROVER

POLICY = Policy.from_toml('[tools]\nneed_approval = ["write_file", "shell"]\n')


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[TaskRunner]:
    """A started TaskRunner hosting the demo chat agent as "demo", tools in tmp_path."""
    service = Service(MemoryStore(), bus=LocalBus(), policy=POLICY, read_file=None)
    await service.open()
    hosted = TaskRunner(service, {"demo": build_hosted_agent(tmp_path)})
    await hosted.start()
    yield hosted
    await hosted.stop()
    await service.close()


def test_the_module_agent_works_in_signoff_workspace(tmp_path: Path) -> None:
    """`signoff.chat.hosted:agent` writes in $SIGNOFF_WORKSPACE, read when it is imported."""
    script = (
        "import asyncio\n"
        "from signoff.chat.hosted import WORKSPACE, agent\n"
        "print(WORKSPACE)\n"
        "print(asyncio.run(agent.run('create a.md saying x')).output)\n"
    )
    env = {**os.environ, ENV_WORKSPACE: str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path.parent,
        check=True,
        timeout=60,
    )
    assert done.stdout.splitlines()[0] == str(tmp_path.resolve())
    assert (tmp_path / "a.md").read_text() == "x\n"


async def test_the_reply_streams_word_by_word(tmp_path: Path) -> None:
    """The demo's text reply arrives as several deltas, so a chat shows it as it comes."""
    deltas: list[str] = []
    async with build_hosted_agent(tmp_path).run_stream_events("hello there") as events:
        async for event in events:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                deltas.append(event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                deltas.append(event.delta.content_delta)
    assert len(deltas) > 5
    assert "".join(deltas).startswith("I am signoff's demo model: a script, not an LLM.")


async def test_parallel_writes_pause_together_and_the_summary_quotes_the_reason(
    runner: TaskRunner, tmp_path: Path
) -> None:
    """Two writes in one turn wait together; one approved runs, the other's reason is quoted."""
    prompt = "create a.md saying x and create b.md saying y"
    paused = await runner.run("demo", prompt, APPROVER)
    assert paused.status == "Paused"
    assert [(p.tool_name, p.args) for p in paused.pending] == [
        ("write_file", {"path": "a.md", "content": "x\n"}),
        ("write_file", {"path": "b.md", "content": "y\n"}),
    ]
    first, second = (p.request_id for p in paused.pending)
    still = await runner.resume(first, "approve", APPROVER)
    assert still.status == "Paused" and not (tmp_path / "a.md").exists()
    done = await runner.resume(second, "reject", APPROVER, reason="b.md is not needed")
    assert done.status == "Completed", done.error
    assert (tmp_path / "a.md").read_text() == "x\n" and not (tmp_path / "b.md").exists()
    summary = done.output
    assert isinstance(summary, str)
    assert "- write_file: wrote 2 characters to a.md" in summary
    assert "write_file was not run:" in summary and "b.md is not needed" in summary


@pytest.mark.parametrize(
    ("prompt", "tool_name", "args"),
    [
        (
            "ask me which database to use",
            "human_intervention_request",
            {
                "prompt": "Which database should I use?",
                "options": ["PostgreSQL", "SQLite", "MySQL"],
            },
        ),
        (
            "ask me some questions",
            "request_human_input",
            {
                "questions": [
                    "What should the project be called?",
                    "Which Python version should it target?",
                    "Anything else I should know before I start?",
                ]
            },
        ),
    ],
)
async def test_asking_a_person_is_a_deferred_call(
    tmp_path: Path, prompt: str, tool_name: str, args: dict[str, object]
) -> None:
    """A choice or questions end the run as a deferred call, for the hosting task to file."""
    result: AgentRunResult[str | DeferredToolRequests] = await build_hosted_agent(tmp_path).run(
        prompt, output_type=[str, DeferredToolRequests]
    )
    assert isinstance(result.output, DeferredToolRequests)
    (call,) = result.output.calls
    assert (call.tool_name, call.args_as_dict()) == (tool_name, args)


async def test_a_hosted_reply_streams_as_several_agui_deltas(runner: TaskRunner) -> None:
    """In a hosted conversation the reply's AG-UI stream carries it in many content events."""
    done = await runner.run("demo", "hello there", APPROVER)
    assert done.status == "Completed"
    events = [event.data async for event in runner.follow(done, None, until="rest")]
    assistant = {
        e["messageId"]
        for e in events
        if e["type"] == "TEXT_MESSAGE_START" and e.get("role") == "assistant"
    }
    replies = [
        str(e["delta"])
        for e in events
        if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] in assistant
    ]
    assert len(replies) > 5 and "".join(replies) == done.output


async def test_a_turn_of_tool_calls_alone_sends_no_empty_assistant_message(
    runner: TaskRunner,
) -> None:
    """The demo model's calls come with an empty text part: no TEXT_MESSAGE_START is sent
    for it, and every text message that starts has content."""
    paused = await runner.run("demo", "create notes.md saying hi", APPROVER)
    assert paused.status == "Paused", paused.error
    events = [event.data for event in paused.events]
    kinds = [e["type"] for e in events]
    assert kinds.index("TOOL_CALL_START") < kinds.index("RUN_FINISHED")
    starts = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"]
    said = {e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT" and e["delta"]}
    assert starts and set(starts) <= said
    assert [e.get("role") for e in events if e["type"] == "TEXT_MESSAGE_START"] == ["user"]


async def test_a_choice_pauses_the_conversation_and_the_model_gets_the_option(
    runner: TaskRunner,
) -> None:
    """ "ask me which database to use" files a choice; the person's option is what is quoted."""
    paused = await runner.run("demo", "ask me which database to use", APPROVER)
    assert paused.status == "Paused", paused.error
    (call,) = paused.pending
    request = await runner.service.get(call.request_id)
    assert (request.kind, request.requested_by) == ("choice", "agent:demo")
    await runner.service.decide(call.request_id, {"type": "choose", "choice": "SQLite"}, APPROVER)
    done = await runner.settle(paused.id)
    for _ in range(50):  # the decision reaches the runner through the bus
        if done.status == "Completed":
            break
        await asyncio.sleep(0.05)
        done = await runner.settle(paused.id)
    assert done.status == "Completed", done.error
    assert done.output == "Here is what happened:\n- human_intervention_request: SQLite"
