"""``POST /resume/{id}`` against a real ``signoff serve --agent``: the inbox's rule, every order.

A hosted run pauses on two gated calls; one is rejected and the other approved, each
through ``/resume`` or the inbox API (``POST /requests/{id}/decision``), in either order.
Every combination must end exactly as deciding both in the inbox does: the task completes,
the model is told of the denial, the approved call runs once and the rejected one never.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, bearer, free_port, start_server

pytest.importorskip("pydantic_ai", reason="needs the pydantic-ai extra")

Path_ = Literal["inbox", "resume"]

AGENTS = """
import os
from pathlib import Path
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.messages import ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel

LOG = Path(os.environ["SIGNOFF_TEST_TOOL_LOG"])

def respond(messages, info):
    parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
    returns = [p for p in parts if isinstance(p, ToolReturnPart)]
    if returns:
        lines = sorted(f"{p.tool_call_id}={p.model_response_str()}" for p in returns)
        return ModelResponse(parts=[TextPart("\\n".join(lines))])
    run = next(p.content for p in parts if isinstance(p, UserPromptPart))
    return ModelResponse(parts=[
        ToolCallPart("shell", {"command": f"alpha-{run}"}, tool_call_id="a1"),
        ToolCallPart("shell", {"command": f"beta-{run}"}, tool_call_id="b1"),
    ])

pair = Agent(FunctionModel(respond))

@pair.tool_plain
def shell(command: str) -> str:
    with LOG.open("a") as log:
        log.write(command + "\\n")
    return f"ran {command}"
"""

ORDERS: list[tuple[Path_, Path_, bool]] = [
    (reject_via, approve_via, reject_first)
    for reject_via in ("inbox", "resume")
    for approve_via in ("inbox", "resume")
    for reject_first in (True, False)
]


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """One ``signoff serve --agent pair=...`` for the module, gating ``shell``."""
    home = tmp_path_factory.mktemp("resume")
    (home / "hosted_agents.py").write_text(AGENTS)
    (home / ".signoff").mkdir()
    (home / ".signoff" / "tools.toml").write_text('[tools]\nneed_approval = ["shell"]\n')
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(home),
        "SIGNOFF_TEST_TOOL_LOG": str(home / "tool.log"),
        "COLUMNS": "200",
    }
    server = start_server(
        f"sqlite:///{home / 'serve.db'}",
        free_port(),
        env,
        "--agent",
        "pair=hosted_agents:pair",
        cwd=str(home),
    )
    try:
        yield server, home / "tool.log"
    finally:
        server.stop()


def _ran(log: Path, run: str) -> list[str]:
    lines = log.read_text().split() if log.exists() else []
    return [line for line in lines if line in (f"alpha-{run}", f"beta-{run}")]


async def _decide(
    http: httpx.AsyncClient, via: Path_, request_id: str, body: dict[str, Any]
) -> httpx.Response:
    if via == "resume":
        action = {"approve": "approve", "reject": "reject"}[body["type"]]
        return await http.post(
            f"{API}/resume/{request_id}", json={"action": action, "reason": body.get("reason", "")}
        )
    return await http.post(f"{API}/requests/{request_id}/decision", json=body)


async def _outcome(
    server: Server, log: Path, run: str, reject_via: Path_, approve_via: Path_, reject_first: bool
) -> dict[str, Any]:
    """Run ``pair``, decide its two calls as told, and return what everyone saw at the end."""
    assert server.admin_token is not None
    async with httpx.AsyncClient(
        base_url=server.base, headers=bearer(server.admin_token), timeout=60
    ) as http:
        started = await http.post(f"{API}/agents/pair/runs", json={"prompt": run})
        assert started.status_code == 201, started.text
        paused = started.json()
        assert paused["status"] == "Paused", paused
        ids = {c["tool_call_id"]: c["request_id"] for c in paused["tool_calls"]}
        steps: list[tuple[Path_, str, dict[str, Any]]] = [
            (reject_via, ids["a1"], {"type": "reject", "reason": "not alpha"}),
            (approve_via, ids["b1"], {"type": "approve"}),
        ]
        if not reject_first:
            steps.reverse()
        for via, request_id, body in steps:
            answer = await _decide(http, via, request_id, body)
            assert answer.status_code == 200, (via, body, answer.text)
        for _ in range(300):  # an inbox decision resumes the task in the background
            task = (await http.get(f"{API}/tasks/{paused['task_id']}")).json()
            if task["status"] not in ("Paused", "Running"):
                break
            await asyncio.sleep(0.05)
        requests = {c: (await http.get(f"{API}/requests/{r}")).json() for c, r in ids.items()}
        audit = {
            c: [
                (e["action"], e["actor"])
                for e in (await http.get(f"{API}/audit", params={"request_id": r})).json()["items"]
            ]
            for c, r in ids.items()
        }
    return {
        "task": task["status"],
        "told": str(task.get("output")).replace(run, "RUN"),
        "history": [
            (h["kind"], h["tool_call_id"], h["by"])
            for h in task["history"]
            if h["kind"] in ("approval", "rejection", "edit")
        ],
        "requests": {c: (r["status"], r["decision"]["decided_by"]) for c, r in requests.items()},
        "audit": audit,
        "ran": [line.replace(run, "RUN") for line in _ran(log, run)],
    }


async def test_inbox_only_is_the_reference(hosted: tuple[Server, Path]) -> None:
    """Both calls decided in the inbox: Completed, the denial told, beta ran once, alpha never."""
    server, log = hosted
    outcome = await _outcome(server, log, "ref", "inbox", "inbox", True)
    assert outcome["task"] == "Completed", outcome
    denial, approved = outcome["told"].split("\n")
    assert denial.startswith("a1=A person rejected this call: not alpha")
    assert approved == "b1=ran beta-RUN"
    assert outcome["ran"] == ["beta-RUN"]
    assert outcome["requests"] == {"a1": ("rejected", "admin"), "b1": ("completed", "admin")}


@pytest.mark.parametrize(("reject_via", "approve_via", "reject_first"), ORDERS)
async def test_resume_ends_as_the_inbox_does(
    hosted: tuple[Server, Path], reject_via: Path_, approve_via: Path_, reject_first: bool
) -> None:
    """Rejecting or approving through /resume, in either order, ends as inbox-only decisions do."""
    server, log = hosted
    run = f"{reject_via}-{approve_via}-{int(reject_first)}"
    reference = await _outcome(server, log, f"ref-{run}", "inbox", "inbox", reject_first)
    outcome = await _outcome(server, log, run, reject_via, approve_via, reject_first)
    assert outcome == reference
    assert outcome["task"] == "Completed" and outcome["ran"] == ["beta-RUN"]
