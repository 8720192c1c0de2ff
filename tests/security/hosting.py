"""A real ``signoff serve --agent`` with a scripted pydantic-ai agent, for the attack tests."""

from __future__ import annotations

import os
from pathlib import Path

from tests.serving import Server, free_port, start_server

AGENTS = """
import os
from pathlib import Path
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.models.function import FunctionModel

LOG = Path(os.environ["SIGNOFF_TEST_TOOL_LOG"])

def respond(messages, info):
    returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(returns[0].model_response_str())])
    return ModelResponse(parts=[ToolCallPart("shell", {"command": "deploy"},
                                             tool_call_id="c1")])

deploy = Agent(FunctionModel(respond))

@deploy.tool_plain
def shell(command: str) -> str:
    with LOG.open("a") as log:
        log.write(command + "\\n")
    return f"ran {command}"
"""


def serve_deploy_agent(tmp_path: Path, tools_toml: str | None = None) -> Server:
    """``signoff serve --agent deploy=...`` on its own database, with ``tools_toml`` if given.

    The agent asks to run ``shell(command="deploy")`` and answers with the tool's result.
    """
    (tmp_path / "hosted_agents.py").write_text(AGENTS)
    if tools_toml is not None:
        (tmp_path / ".signoff").mkdir(exist_ok=True)
        (tmp_path / ".signoff" / "tools.toml").write_text(tools_toml)
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path),
        "SIGNOFF_TEST_TOOL_LOG": str(tmp_path / "tool.log"),
        "COLUMNS": "200",
    }
    return start_server(
        f"sqlite:///{tmp_path / 'serve.db'}",
        free_port(),
        env,
        "--agent",
        "deploy=hosted_agents:deploy",
        cwd=str(tmp_path),
    )


def tool_log(tmp_path: Path) -> list[str]:
    """Every command the hosted agent's tool ran, in order."""
    path = tmp_path / "tool.log"
    return path.read_text().split() if path.exists() else []
