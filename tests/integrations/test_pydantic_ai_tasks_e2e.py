"""Hosted tasks against a real ``signoff serve --agent`` process: restarts and crashes."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import httpx

from signoff.server.app import API
from tests.serving import Server, bearer, free_port, start_server

AGENTS = """
import os, time
from pathlib import Path
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.models.function import DeltaToolCall, FunctionModel

LOG = Path(os.environ["SIGNOFF_TEST_TOOL_LOG"])

def calling(command):
    def respond(messages, info):
        returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
                   if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(returns[0].model_response_str())])
        return ModelResponse(parts=[ToolCallPart("shell", {"command": command},
                                                 tool_call_id="c1")])
    async def stream(messages, info):
        for part in respond(messages, info).parts:
            if isinstance(part, TextPart):
                yield part.content
            else:
                call = DeltaToolCall(part.tool_name, part.args_as_json_str(),
                                     tool_call_id=part.tool_call_id)
                yield {0: call}

    agent = Agent(FunctionModel(respond, stream_function=stream))

    @agent.tool_plain
    def shell(command: str) -> str:
        with LOG.open("a") as log:
            log.write(command + "\\n")
        if command == "hang":
            time.sleep(600)  # the server is killed while this runs
        return f"ran {command}"

    return agent

deploy = calling("deploy")
hang = calling("hang")
"""


def serve_agents(tmp_path: Path, port: int) -> Server:
    """``signoff serve --agent deploy=... --agent hang=...`` on the test's database."""
    (tmp_path / "hosted_agents.py").write_text(AGENTS)
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path),
        "SIGNOFF_TEST_TOOL_LOG": str(tmp_path / "tool.log"),
        "COLUMNS": "200",
    }
    return start_server(
        f"sqlite:///{tmp_path / 'serve.db'}",
        port,
        env,
        "--agent",
        "deploy=hosted_agents:deploy",
        "--agent",
        "hang=hosted_agents:hang",
        cwd=str(tmp_path),
    )


def tool_log(tmp_path: Path) -> list[str]:
    """Every tool call that started, in order."""
    path = tmp_path / "tool.log"
    return path.read_text().split() if path.exists() else []


async def test_paused_task_survives_a_restart_and_runs_once(tmp_path: Path) -> None:
    """Stop while Paused, start again, resume twice at once: it completes, the tool ran once."""
    port = free_port()
    server = serve_agents(tmp_path, port)
    admin = server.admin_token
    assert admin is not None
    try:
        async with httpx.AsyncClient(base_url=server.base, headers=bearer(admin)) as http:
            started = await http.post(f"{API}/agents/deploy/runs", json={"prompt": "ship it"})
            paused = started.json()
            assert paused["status"] == "Paused", paused
    finally:
        server.stop()
    assert tool_log(tmp_path) == []
    again = serve_agents(tmp_path, port)
    try:
        async with httpx.AsyncClient(
            base_url=again.base, headers=bearer(admin), timeout=60
        ) as http:
            url = f"{API}/resume/{paused['request_id']}"
            answers = await asyncio.gather(
                http.post(url, json={"action": "approve"}),
                http.post(url, json={"action": "approve"}),
            )
            codes = sorted(a.status_code for a in answers)
            assert codes in ([200, 200], [200, 409]), [a.text for a in answers]
            task: dict[str, Any] = (await http.get(f"{API}/tasks/{paused['task_id']}")).json()
            assert task["status"] == "Completed" and task["output"] == "ran deploy"
    finally:
        again.stop()
    assert tool_log(tmp_path) == ["deploy"]


async def test_a_server_killed_mid_tool_fails_the_task_and_never_reruns(tmp_path: Path) -> None:
    """SIGKILL during the tool run: after restart the task is Failed and the call not re-run."""
    port = free_port()
    server = serve_agents(tmp_path, port)
    admin = server.admin_token
    assert admin is not None
    async with httpx.AsyncClient(base_url=server.base, headers=bearer(admin), timeout=60) as http:
        paused = (await http.post(f"{API}/agents/hang/runs", json={"prompt": "go"})).json()
        resuming = asyncio.create_task(
            http.post(f"{API}/resume/{paused['request_id']}", json={"action": "approve"})
        )
        for _ in range(400):  # until the tool has started
            if tool_log(tmp_path) == ["hang"]:
                break
            await asyncio.sleep(0.05)
        assert tool_log(tmp_path) == ["hang"]
        server.process.send_signal(signal.SIGKILL)
        server.process.communicate(timeout=20)
        resuming.cancel()
        await asyncio.gather(resuming, return_exceptions=True)
    again = serve_agents(tmp_path, port)
    try:
        async with httpx.AsyncClient(base_url=again.base, headers=bearer(admin)) as http:
            task = (await http.get(f"{API}/tasks/{paused['task_id']}")).json()
            assert task["status"] == "Failed" and "server stopped" in task["error"]
            request = (await http.get(f"{API}/requests/{paused['request_id']}")).json()
            assert request["status"] == "failed"
            assert "not run again" in request["result"]["error"]
            retry = await http.post(
                f"{API}/resume/{paused['request_id']}", json={"action": "approve"}
            )
            assert retry.status_code == 409
    finally:
        again.stop()
    assert tool_log(tmp_path) == ["hang"]
