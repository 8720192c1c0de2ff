"""The agent ``signoff serve --agent deploy=tests.paths.hosted_agent:hosted`` runs.

Its scripted model calls the tool its prompt names (``deploy`` or ``deploy_soon``) with
:data:`~tests.paths.scenarios.ARGS`, then answers with exactly what the tool call told it,
so a hosted run's output is what the model was told. Each run of a tool is logged as one
JSON line to ``$SIGNOFF_PATHS_TOOL_LOG``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

from tests.paths.scenarios import ARGS, tool_result
from tests.streaming_models import streaming


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call the prompt's tool once; then say what its return was."""
    parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
    returns = [p for p in parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(returns[0].model_response_str())])
    tool = next(str(p.content) for p in parts if isinstance(p, UserPromptPart))
    return ModelResponse(parts=[ToolCallPart(tool, dict(ARGS), tool_call_id="call_1")])


hosted: Agent[None, str] = Agent(streaming(respond))


def run(service: str, version: str) -> str:
    """Log the run; what every path's deploy returns."""
    args = {"service": service, "version": version}
    with Path(os.environ["SIGNOFF_PATHS_TOOL_LOG"]).open("a", encoding="utf-8") as log:
        log.write(json.dumps(args) + "\n")
    return tool_result(args)


@hosted.tool_plain(name="deploy")
def deploy(service: str, version: str) -> str:
    """Deploy a version."""
    return run(service, version)


@hosted.tool_plain(name="deploy_soon")
def deploy_soon(service: str, version: str) -> str:
    """Deploy a version (the server's policy expires its requests soon)."""
    return run(service, version)
