"""The scripted demo model drives real pydantic-ai agents with no API key, deterministically."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai", reason="needs the pydantic-ai extra: pip install 'signoff[pydantic-ai]'"
)

from pydantic_ai import (
    Agent,
    AgentRunResultEvent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    Tool,
    ToolDenied,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import FunctionModel
from typing_extensions import TypedDict

from signoff.chat.agent import build_agent
from signoff.chat.demo import DEMO_MODEL_NAME, demo_model, resolve_model

Call = tuple[str, dict[str, Any]]

OLD_LOGS = "find logs -name '*.log' -mtime +30 -delete"
QUESTIONS = [
    "What should the project be called?",
    "Which Python version should it target?",
    "Anything else I should know before I start?",
]


class Question(TypedDict):
    """A question as an object, for a tool that takes them so."""

    id: str
    text: str
    required: bool


@dataclass
class Desk:
    """Local tools under the names the demo calls; each records its calls and says what it did."""

    calls: list[Call] = field(default_factory=list)

    def write_file(self, path: str, content: str) -> str:
        """Pretend to write a file."""
        self.calls.append(("write_file", {"path": path, "content": content}))
        return f"wrote {len(content)} bytes to {path}"

    def shell(self, command: str) -> str:
        """Pretend to run a command."""
        self.calls.append(("shell", {"command": command}))
        return f"ran {command}"

    def human_intervention_request(self, prompt: str, options: list[str]) -> str:
        """Pretend a person chose the second option."""
        self.calls.append(("human_intervention_request", {"prompt": prompt, "options": options}))
        return options[1]

    def request_human_input(self, questions: list[str]) -> str:
        """Pretend a person answered."""
        self.calls.append(("request_human_input", {"questions": questions}))
        return f"answered {len(questions)} questions"

    def tools(self, *names: str) -> list[Tool[None]]:
        """The named tools (all four when none are named)."""
        every: list[Callable[..., str]] = [
            self.write_file,
            self.shell,
            self.human_intervention_request,
            self.request_human_input,
        ]
        return [Tool(tool) for tool in every if not names or tool.__name__ in names]


def agent_with(desk: Desk, *names: str) -> Agent[None, str]:
    """An agent on the demo model with the desk's tools (all four when none are named)."""
    return Agent(demo_model(), tools=desk.tools(*names))


def gated_shell(desk: Desk) -> Agent[None, str | DeferredToolRequests]:
    """An agent on the demo model with the desk's shell, which needs approval."""
    return Agent(
        demo_model(),
        tools=[Tool(desk.shell, requires_approval=True)],
        output_type=[str, DeferredToolRequests],
    )


def responses(messages: list[ModelMessage]) -> list[ModelResponse]:
    """The model's responses in a run's messages."""
    return [message for message in messages if isinstance(message, ModelResponse)]


def calls_in(response: ModelResponse) -> list[Call]:
    """The tool calls of one response, as (name, args)."""
    return [
        (part.tool_name, part.args_as_dict())
        for part in response.parts
        if isinstance(part, ToolCallPart)
    ]


def transcript(messages: list[ModelMessage]) -> list[list[ModelResponsePart]]:
    """Everything the model said in a run, without timestamps and usage."""
    return [list(response.parts) for response in responses(messages)]


@pytest.fixture
def desk() -> Desk:
    """A fresh set of recording tools."""
    return Desk()


def test_resolve_model_defaults_to_the_labelled_demo() -> None:
    """None and "demo" give the scripted model, clearly named; any other string passes through."""
    for name in (None, "demo", " Demo "):
        model = resolve_model(name)
        assert isinstance(model, FunctionModel)
        assert model.model_name == DEMO_MODEL_NAME
        assert "no LLM" in model.model_name
    assert resolve_model("openai:gpt-5") == "openai:gpt-5"
    assert resolve_model("anthropic:claude-sonnet-4-5") == "anthropic:claude-sonnet-4-5"


def test_missing_extra_names_the_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pydantic-ai, importing the demo says which pip install fixes it."""
    monkeypatch.delitem(sys.modules, "signoff.chat.demo")
    for name in ("pydantic_ai", "pydantic_ai.messages", "pydantic_ai.models.function"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"pip install 'signoff\[pydantic-ai\]'"):
        importlib.import_module("signoff.chat.demo")


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        (
            "create notes.md saying hello",
            ("write_file", {"path": "notes.md", "content": "hello\n"}),
        ),
        (
            "write buy milk to todo.txt",
            ("write_file", {"path": "todo.txt", "content": "buy milk\n"}),
        ),
        (
            "make a file called 'my notes.md' saying \"hi there\"",
            ("write_file", {"path": "my notes.md", "content": "hi there\n"}),
        ),
        ("run ls -la", ("shell", {"command": "ls -la"})),
        ("Please run `git status`.", ("shell", {"command": "git status"})),
        ("delete old logs", ("shell", {"command": OLD_LOGS})),
        (
            "ask me which database to use",
            (
                "human_intervention_request",
                {
                    "prompt": "Which database should I use?",
                    "options": ["PostgreSQL", "SQLite", "MySQL"],
                },
            ),
        ),
        ("ask me some questions", ("request_human_input", {"questions": QUESTIONS})),
        ("questions", ("request_human_input", {"questions": QUESTIONS})),
    ],
)
async def test_prompt_makes_the_expected_tool_call(desk: Desk, prompt: str, expected: Call) -> None:
    """Each understood prompt makes exactly its tool call, then ends the run in text."""
    result = await agent_with(desk).run(prompt)
    first, last = responses(result.all_messages())
    assert calls_in(first) == [expected]
    assert desk.calls == [expected]
    assert last.parts == [TextPart(result.output)]
    assert result.output.startswith("Here is what happened:")
    assert f"- {expected[0]}: " in result.output


async def test_summary_quotes_each_result(desk: Desk) -> None:
    """The closing text quotes what each tool returned, under the tool's name."""
    result = await agent_with(desk).run("ask me which database to use")
    assert result.output == "Here is what happened:\n- human_intervention_request: SQLite"


async def test_requests_joined_by_and_are_parallel_calls(desk: Desk) -> None:
    """Requests joined by "and" are several calls in one response, with distinct ids."""
    result = await agent_with(desk).run("create notes.md saying hello and run ls -la")
    calling, summary = responses(result.all_messages())
    assert calls_in(calling) == [
        ("write_file", {"path": "notes.md", "content": "hello\n"}),
        ("shell", {"command": "ls -la"}),
    ]
    ids = [part.tool_call_id for part in calling.parts if isinstance(part, ToolCallPart)]
    assert len(set(ids)) == 2
    assert summary.parts == [TextPart(result.output)]
    assert result.output == (
        "Here is what happened:\n- write_file: wrote 6 bytes to notes.md\n- shell: ran ls -la"
    )


async def test_and_inside_a_request_does_not_split_it(desk: Desk) -> None:
    """An "and" that does not start a new request stays in the text it belongs to."""
    result = await agent_with(desk).run("write salt and pepper to list.md and then run wc -l")
    assert calls_in(responses(result.all_messages())[0]) == [
        ("write_file", {"path": "list.md", "content": "salt and pepper\n"}),
        ("shell", {"command": "wc -l"}),
    ]


async def test_missing_tool_is_named_in_a_text_reply(desk: Desk) -> None:
    """A request whose tool the agent lacks gets a text reply naming that tool, and no call."""
    result = await agent_with(desk, "write_file").run("run ls -la")
    (only,) = responses(result.all_messages())
    assert calls_in(only) == []
    assert "`shell`" in result.output
    assert "run ls -la" in result.output
    assert desk.calls == []


async def test_missing_tool_among_several_is_reported_in_the_summary(desk: Desk) -> None:
    """The calls the agent can make still run; the summary names the one it could not."""
    result = await agent_with(desk, "write_file").run("create notes.md saying hello and run ls")
    calling, _ = responses(result.all_messages())
    assert calls_in(calling) == [("write_file", {"path": "notes.md", "content": "hello\n"})]
    assert "- write_file: wrote 6 bytes to notes.md" in result.output
    assert "`shell`" in result.output


async def test_unknown_prompt_gets_help_text(desk: Desk) -> None:
    """A prompt the script does not understand gets a help text saying what it understands
    with this agent's tools, and offers nothing the agent has no tool for."""
    result = await agent_with(desk, "shell").run("what's the weather like?")
    assert desk.calls == []
    assert "not an LLM" in result.output
    assert "run ls -la" in result.output and "delete old logs" in result.output
    for other in ("create notes.md saying hello", "ask me some questions", "which database"):
        assert other not in result.output
    assert "This agent's tools: shell." in result.output
    none = await Agent(demo_model()).run("hello?")
    assert "This agent has none of the tools I call (write_file, shell," in none.output


async def test_the_chat_agents_help_offers_only_what_it_can_do(tmp_path: Path) -> None:
    """signoff chat's agent has the coding tools and no human tools: its help offers files
    and shell commands, not a choice or questions."""
    result = await build_agent(None, tmp_path).run("hello?")
    assert isinstance(result.output, str)
    assert "run ls -la" in result.output and "write hello to notes.md" in result.output
    assert "which database" not in result.output and "some questions" not in result.output


async def test_same_conversation_gets_the_same_response(desk: Desk) -> None:
    """Two runs of the same prompt say exactly the same things, tool call ids included."""
    prompt = "create notes.md saying hello and run ls -la and ask me some questions"
    first = await agent_with(desk).run(prompt)
    second = await agent_with(desk).run(prompt)
    assert transcript(first.all_messages()) == transcript(second.all_messages())


async def test_tool_call_ids_stay_unique_across_turns(desk: Desk) -> None:
    """A second prompt in the same conversation gets fresh tool call ids."""
    agent = agent_with(desk)
    first = await agent.run("run ls")
    second = await agent.run("run pwd", message_history=first.all_messages())
    ids = [
        part.tool_call_id
        for response in responses(second.all_messages())
        for part in response.parts
        if isinstance(part, ToolCallPart)
    ]
    assert len(ids) == 2
    assert len(set(ids)) == 2
    assert second.output == "Here is what happened:\n- shell: ran pwd"


async def test_failing_tool_ends_the_run_in_text(desk: Desk) -> None:
    """A tool that asks for a retry gets its message quoted, and the demo does not loop."""

    def shell(command: str) -> str:
        """Always refuse."""
        raise ModelRetry(f"{command!r} is not allowed here")

    result = await Agent(demo_model(), tools=[shell]).run("run rm -rf /")
    assert len(responses(result.all_messages())) == 2
    assert "shell asked for a retry" in result.output
    assert "'rm -rf /' is not allowed here" in result.output


async def test_long_results_are_cut_in_the_summary() -> None:
    """A result of many lines is quoted up to a limit, with a count of what was left out."""

    def shell(command: str) -> str:
        """Print many lines."""
        return "\n".join(f"line {n}" for n in range(50))

    result = await Agent(demo_model(), tools=[shell]).run("run seq 50")
    assert "line 19" in result.output
    assert "line 20" not in result.output
    assert "... (30 more lines)" in result.output


async def test_question_objects_follow_the_tool_schema() -> None:
    """A questions tool that takes {id, text, required} objects gets objects, not strings."""

    asked: list[list[Question]] = []

    def request_human_input(questions: list[Question]) -> str:
        """Record the questions."""
        asked.append(questions)
        return "ok"

    await Agent(demo_model(), tools=[request_human_input]).run("ask me some questions")
    assert [question["text"] for question in asked[0]] == QUESTIONS
    assert [question["id"] for question in asked[0]] == ["name", "python", "notes"]


async def test_streamed_run_matches_the_plain_run(desk: Desk) -> None:
    """Streaming the same prompt gives the same calls and the same closing text."""
    prompt = "create notes.md saying hello and run ls -la"
    plain = await agent_with(desk).run(prompt)
    streamed_output: str | None = None
    async with agent_with(desk).run_stream_events(prompt) as events:
        async for event in events:
            if isinstance(event, AgentRunResultEvent):
                streamed_output = event.result.output
                streamed_messages = event.result.all_messages()
    assert streamed_output == plain.output
    assert [calls_in(r) for r in responses(streamed_messages)] == [
        calls_in(r) for r in responses(plain.all_messages())
    ]


async def test_approval_pauses_the_run_with_the_shell_call(desk: Desk) -> None:
    """A tool that requires approval pauses the run with the demo's call in `.approvals`."""
    agent = gated_shell(desk)
    result = await agent.run("run ls -la")
    assert isinstance(result.output, DeferredToolRequests)
    (call,) = result.output.approvals
    assert (call.tool_name, call.args_as_dict()) == ("shell", {"command": "ls -la"})
    assert desk.calls == []


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (True, "- shell: ran ls -la"),
        (ToolDenied("too risky"), "- shell was not run: too risky"),
    ],
)
async def test_resumed_run_summarises_the_decision(
    desk: Desk, decision: bool | ToolDenied, expected: str
) -> None:
    """After approval the summary quotes the result; after a denial, the person's reason."""
    agent = gated_shell(desk)
    paused = await agent.run("run ls -la")
    assert isinstance(paused.output, DeferredToolRequests)
    (call,) = paused.output.approvals
    resumed = await agent.run(
        message_history=paused.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: decision}),
    )
    assert resumed.output == f"Here is what happened:\n{expected}"
