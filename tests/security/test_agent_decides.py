"""Attack: an agent token tries to decide, on every path, against a real server.

An agent submits, waits, claims and reports; it never decides anything: not its own
request, not in a batch, not by resuming a run it started, not over the CLI, and not by
making, revoking or minting what would decide for it (grants, tokens).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.security.hosting import serve_deploy_agent, tool_log
from tests.serving import Server, agent_token, bearer

UNKNOWN = "req_" + "x" * 22


def _submit(http: httpx.Client, token: str, call_id: str = "c1") -> dict[str, Any]:
    body = {
        "session_id": f"s-{token[-6:]}",
        "tool_name": "shell",
        "tool_args": {"cmd": "rm -rf /"},
        "tool_call_id": call_id,
    }
    made = http.post(f"{API}/requests", json=body, headers=bearer(token))
    assert made.status_code == 201, made.text
    request: dict[str, Any] = made.json()
    return request


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 403, response.text
    body = response.json()
    assert body["error"] == "NotAllowed" and "may not decide" in body["detail"], body


@pytest.mark.parametrize(
    "decision",
    [
        {"type": "approve"},
        {"type": "approve", "scope": "always"},
        {"type": "approve", "args": {"cmd": "ls"}},
        {"type": "reject", "reason": "x"},
        {"type": "respond", "feedback": "done"},
    ],
)
def test_an_agent_is_refused_403_on_the_decision_endpoint_whatever_the_id(
    server: Server, decision: dict[str, Any]
) -> None:
    """An agent gets the same 403 for its own, another agent's and an unknown request id."""
    own, other = agent_token(server, "bot"), agent_token(server, "other")
    with httpx.Client(base_url=server.base, timeout=30) as http:
        mine = _submit(http, own)
        theirs = _submit(http, other)
        answers = [
            http.post(f"{API}/requests/{rid}/decision", json=decision, headers=bearer(own))
            for rid in (mine["id"], theirs["id"], UNKNOWN)
        ]
        for answer in answers:
            _refused(answer)
        assert (
            len(
                {
                    a.text.replace(rid, "ID")
                    for a, rid in zip(answers, (mine["id"], theirs["id"], UNKNOWN), strict=True)
                }
            )
            == 1
        )
        for rid, token in ((mine["id"], own), (theirs["id"], other)):
            state = http.get(f"{API}/requests/{rid}", headers=bearer(token)).json()
            assert state["status"] == "pending" and state["decision"] is None
        grants = http.get(f"{API}/grants", headers=bearer(server.admin_token or ""))
        assert grants.json()["items"] == []


def test_an_agent_is_refused_even_on_its_own_decided_request(server: Server) -> None:
    """The refusal comes before any state check: a decided request answers 403, not 409."""
    own = agent_token(server)
    with httpx.Client(base_url=server.base, timeout=30) as http:
        mine = _submit(http, own)
        admin = bearer(server.admin_token or "")
        done = http.post(
            f"{API}/requests/{mine['id']}/decision",
            json={"type": "reject", "reason": "no"},
            headers=admin,
        )
        assert done.status_code == 200, done.text
        _refused(
            http.post(
                f"{API}/requests/{mine['id']}/decision",
                json={"type": "approve"},
                headers=bearer(own),
            )
        )
        assert http.get(f"{API}/requests/{mine['id']}", headers=admin).json()["status"] == (
            "rejected"
        )


def test_an_agents_batch_decision_is_refused_as_a_whole(server: Server) -> None:
    """POST /decisions with an agent token is one 403; none of the ids is decided."""
    own = agent_token(server)
    with httpx.Client(base_url=server.base, timeout=30) as http:
        ids = [_submit(http, own, f"c{n}")["id"] for n in range(3)]
        for kind in ({"type": "approve"}, {"type": "reject", "reason": "x"}):
            _refused(
                http.post(
                    f"{API}/decisions", json={"ids": [*ids, UNKNOWN], **kind}, headers=bearer(own)
                )
            )
        for rid in ids:
            assert http.get(f"{API}/requests/{rid}", headers=bearer(own)).json()["status"] == (
                "pending"
            )


def test_an_agent_cannot_decide_through_grants_or_tokens(server: Server) -> None:
    """An agent may not list or revoke grants, nor mint or revoke tokens (say an approver's)."""
    own = agent_token(server)
    admin = bearer(server.admin_token or "")
    with httpx.Client(base_url=server.base, timeout=30) as http:
        first = _submit(http, own, "c1")
        granted = http.post(
            f"{API}/requests/{first['id']}/decision",
            json={"type": "approve", "scope": "session"},
            headers=admin,
        )
        assert granted.status_code == 200, granted.text
        grant_id = http.get(f"{API}/grants", headers=admin).json()["items"][0]["id"]
        assert http.get(f"{API}/grants", headers=bearer(own)).status_code == 403
        assert http.post(f"{API}/grants/{grant_id}/revoke", headers=bearer(own)).status_code == 403
        assert http.get(f"{API}/grants", headers=admin).json()["items"][0]["revoked_at"] is None
        for role in ("approver", "admin", "agent"):
            minted = http.post(
                f"{API}/tokens", json={"name": "me-too", "role": role}, headers=bearer(own)
            )
            assert minted.status_code == 403, minted.text
        tokens = http.get(f"{API}/tokens", headers=admin).json()["items"]
        assert "me-too" not in {t["name"] for t in tokens}
        admin_id = next(t["id"] for t in tokens if t["role"] == "admin")
        assert http.post(f"{API}/tokens/{admin_id}/revoke", headers=bearer(own)).status_code == 403


def test_the_cli_with_an_agent_token_exits_3_and_decides_nothing(server: Server) -> None:
    """``signoff approve/reject ID --server URL --token AGENT``: exit 3, one line."""
    own = agent_token(server)
    with httpx.Client(base_url=server.base, timeout=30) as http:
        mine = _submit(http, own)
    remote = ["--server", server.base, "--token", own]
    for args in (
        ["approve", mine["id"]],
        ["approve", mine["id"], "--scope", "always"],
        ["reject", mine["id"], "--reason", "x"],
        ["approve", UNKNOWN],  # the same refusal: the CLI learns nothing about ids either
    ):
        done = subprocess.run(
            [sys.executable, "-m", "signoff", *args, *remote],
            capture_output=True,
            text=True,
            env=server.env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 3, (args, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "may not decide" in lines[0]
        assert "Traceback" not in done.stderr
    with httpx.Client(base_url=server.base, timeout=30) as http:
        state = http.get(f"{API}/requests/{mine['id']}", headers=bearer(own)).json()
    assert state["status"] == "pending"


def test_an_agent_cannot_resume_a_run_it_started(tmp_path: Path) -> None:
    """An agent that started a hosted run gets 403 on /resume of it; the call never runs."""
    server = serve_deploy_agent(tmp_path)
    try:
        own = agent_token(server)
        with httpx.Client(base_url=server.base, timeout=60) as http:
            started = http.post(
                f"{API}/agents/deploy/runs", json={"prompt": "ship"}, headers=bearer(own)
            )
            assert started.status_code == 201, started.text
            paused = started.json()
            assert paused["status"] == "Paused", paused
            for how in (
                {"json": {"action": "approve"}},
                {"params": {"action": "approve"}},
                {"json": {"action": "edit", "args": {"command": "ls"}}},
                {"json": {"action": "reject", "reason": "x"}},
            ):
                answer = http.post(
                    f"{API}/resume/{paused['request_id']}", headers=bearer(own), **how
                )
                _refused(answer)
            _refused(
                http.post(
                    f"{API}/resume/{UNKNOWN}", json={"action": "approve"}, headers=bearer(own)
                )
            )
            task = http.get(f"{API}/tasks/{paused['task_id']}", headers=bearer(own)).json()
            assert task["status"] == "Paused"
            request = http.get(
                f"{API}/requests/{paused['request_id']}", headers=bearer(server.admin_token or "")
            ).json()
            assert request["status"] == "pending"
    finally:
        server.stop()
    assert tool_log(tmp_path) == []
