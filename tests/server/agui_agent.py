"""A scripted pydantic-ai agent a real ``signoff serve --agent`` hosts for the AG-UI tests.

``write a.txt=hello, b.txt=bye`` asks for one gated ``write_file`` call per file, in one
response (parallel calls); ``choose`` asks a person to pick a colour; anything else gets a
reply naming every prompt of the conversation so far (so a follow-up shows the model saw the
earlier turns). Once tools have answered, it replies ``done:`` and each tool's result (a
denial's text included). Text is streamed a word at a time. ``write_file`` writes into
``$SIGNOFF_WORKSPACE`` and logs each run in ``runs.log`` there, so a test sees on disk
whether, and with which arguments, the tool really ran.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

from signoff.integrations.pydantic_ai.human import deferred_human_toolset
from tests.streaming_models import streaming

WORKSPACE = Path(os.environ.get("SIGNOFF_WORKSPACE", "."))
COLOURS = ["red", "blue"]
"""The options ``choose`` offers."""


def _prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def _reply(messages: list[ModelMessage]) -> list[ModelResponsePart]:
    last = messages[-1]
    answers = [
        part.model_response_str() if isinstance(part, ToolReturnPart) else part.model_response()
        for part in (last.parts if isinstance(last, ModelRequest) else ())
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    ]
    if answers:
        return [TextPart("done: " + " | ".join(answers))]
    prompts = _prompts(messages)
    turn = len(prompts)
    prompt = prompts[-1] if prompts else ""
    if prompt.startswith("write "):
        calls: list[ModelResponsePart] = []
        for index, spec in enumerate(prompt.removeprefix("write ").split(",")):
            path, _, content = spec.strip().partition("=")
            args = {"path": path, "content": content}
            calls.append(ToolCallPart("write_file", args, tool_call_id=f"w{turn}_{index}"))
        return calls
    if prompt.startswith("choose"):
        ask: dict[str, object] = {"prompt": "Which colour?", "options": COLOURS}
        return [ToolCallPart("human_intervention_request", ask, tool_call_id=f"c{turn}")]
    return [TextPart(f"turn {turn}, you said: " + " / ".join(prompts))]


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=_reply(messages))


agent = Agent(streaming(_respond), toolsets=[deferred_human_toolset()])
"""The agent the tests host as ``chat``."""


@agent.tool_plain
def write_file(path: str, content: str) -> str:
    """Write ``content`` to ``path`` in the workspace."""
    (WORKSPACE / path).write_text(content)
    with (WORKSPACE / "runs.log").open("a") as log:
        log.write(f"{path}={content}\n")
    return f"wrote {path}"


def runs(workspace: Path) -> list[str]:
    """Every ``path=content`` the tool wrote, in order."""
    log = workspace / "runs.log"
    return log.read_text().splitlines() if log.exists() else []
