"""A hostile scripted agent for the web chat's XSS test: markup in everything it says.

Its first answer is two calls in one turn: a gated ``write_file`` whose arguments are
markup, and a question to a person (``human_intervention_request``) whose prompt and options
are markup. Once they have answered, it replies with markup and quotes each result (a
rejection's reason included). Text is streamed a word at a time.
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
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo

from signoff.chat.agent import chat_tools
from signoff.integrations.pydantic_ai.human import deferred_human_toolset
from tests.streaming_models import streaming

ARGS = "<img src=x onerror=alert('args')>"
QUESTION = "<svg onload=alert('question')>Which?"
OPTIONS = ["<img src=x onerror=alert('option')>", "<script>alert('option2')</script>"]
REPLY = "<img src=x onerror=alert('reply')> done:"


def _reply(messages: list[ModelMessage]) -> list[ModelResponsePart]:
    last = messages[-1]
    results = [
        part.model_response_str()
        for part in (last.parts if isinstance(last, ModelRequest) else ())
        if isinstance(part, ToolReturnPart)
    ]
    if results:
        return [TextPart(" ".join([REPLY, *results]))]
    ask: dict[str, object] = {"prompt": QUESTION, "options": OPTIONS}
    return [
        ToolCallPart("write_file", {"path": "x.html", "content": ARGS}, tool_call_id="h1"),
        ToolCallPart("human_intervention_request", ask, tool_call_id="h2"),
    ]


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=_reply(messages))


agent: Agent[None, str] = Agent(
    streaming(_respond),
    toolsets=[
        chat_tools(Path(os.environ.get("SIGNOFF_WORKSPACE", ".")).resolve()),
        deferred_human_toolset(),
    ],
)
"""What ``signoff serve --agent hostile=tests.security.chat_hostile:agent`` hosts."""
