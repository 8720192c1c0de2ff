"""Attack: an agent tries to get itself approved by expiry, or to take reject away from a person.

Expiry, what it does, and which decisions a person has come from the operator's
tools.toml; the requester may only make its own request stricter.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.security.policy_serving import serve_with_policy
from tests.serving import Server, agent_token, bearer

TWO_APPROVERS = """
[tools]
need_approval = ["*"]

[governance]
approvers = ["alice", "bob"]
quorum = 2
"""

APPROVE_ON_EXPIRY = """
[tools]
need_approval = ["*"]

[[rules]]
tool = "nightly"
action = "ask"
name = "nightly-approves-on-expiry"
expires_in = 1
on_expire = "approve"
"""


@pytest.fixture
def two_approvers(tmp_path: Path) -> Iterator[Server]:
    """A server whose policy asks two named approvers about every call."""
    yield from serve_with_policy(tmp_path, TWO_APPROVERS)


@pytest.fixture
def approve_on_expiry(tmp_path: Path) -> Iterator[Server]:
    """A server whose policy lets ``nightly`` calls be approved by a 1 s expiry."""
    yield from serve_with_policy(tmp_path, APPROVE_ON_EXPIRY)


def _refused_naming(answer: httpx.Response, field: str) -> None:
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["error"] == "InvalidRequest", body
    assert body["detail"].startswith(f"{field}: "), body
    assert "\n" not in body["detail"]


def _wait(http: httpx.Client, token: str, request_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while True:
        got = http.get(
            f"{API}/requests/{request_id}/wait", params={"timeout": 5}, headers=bearer(token)
        )
        assert got.status_code == 200, got.text
        request: dict[str, Any] = got.json()
        if request["status"] != "pending" or time.monotonic() > deadline:
            return request


def test_an_agent_cannot_ask_to_be_approved_by_expiry(two_approvers: Server) -> None:
    """on_expire approve from the agent is a 422 naming on_expire; nothing is filed or runs."""
    token = agent_token(two_approvers)
    call = {
        "session_id": "s",
        "tool_name": "shell",
        "tool_args": {"command": "rm -rf /"},
        "tool_call_id": "c1",
        "expires_in": 0.5,
    }
    with httpx.Client(base_url=two_approvers.base, timeout=30) as http:
        _refused_naming(
            http.post(
                f"{API}/requests", json={**call, "on_expire": "approve"}, headers=bearer(token)
            ),
            "on_expire",
        )
        assert (
            "set by policy, not by the requester"
            in http.post(
                f"{API}/requests", json={**call, "on_expire": "approve"}, headers=bearer(token)
            ).json()["detail"]
        )
        listed = http.get(f"{API}/requests", headers=bearer(token)).json()
        assert listed["items"] == []
        made = http.post(f"{API}/requests", json=call, headers=bearer(token))
        assert made.status_code == 201, made.text
        assert made.json()["on_expire"] == "reject"
        ended = _wait(http, token, made.json()["id"])
        assert ended["status"] == "expired", ended
        claim = http.post(
            f"{API}/requests/{ended['id']}/claim",
            json={"args": call["tool_args"]},
            headers=bearer(token),
        )
        assert claim.status_code == 409, claim.text


def test_an_agent_cannot_choose_its_default_answer_on_expiry(two_approvers: Server) -> None:
    """A choice request with on_expire default and the agent's default_choice is refused."""
    token = agent_token(two_approvers)
    body = {
        "session_id": "s",
        "kind": "choice",
        "prompt": "Deploy where?",
        "options": ["staging", "prod"],
        "expires_in": 0.5,
        "on_expire": "default",
        "default_choice": "prod",
    }
    with httpx.Client(base_url=two_approvers.base, timeout=30) as http:
        _refused_naming(http.post(f"{API}/requests", json=body, headers=bearer(token)), "on_expire")


def test_an_agent_cannot_take_reject_away_from_a_person(two_approvers: Server) -> None:
    """allowed_decisions without reject is a 422 naming allowed_decisions; with it, it narrows."""
    token = agent_token(two_approvers)
    call = {"session_id": "s", "tool_name": "shell", "tool_args": {"command": "ls"}}
    with httpx.Client(base_url=two_approvers.base, timeout=30) as http:
        for only in (["approve"], ["approve", "respond"]):
            _refused_naming(
                http.post(
                    f"{API}/requests",
                    json={**call, "allowed_decisions": only},
                    headers=bearer(token),
                ),
                "allowed_decisions",
            )
        made = http.post(
            f"{API}/requests", json={**call, "allowed_decisions": ["reject"]}, headers=bearer(token)
        )
        assert made.status_code == 201, made.text
        assert made.json()["allowed_decisions"] == ["reject"]


def test_only_policy_approves_on_expiry_and_the_audit_names_it(
    approve_on_expiry: Server,
) -> None:
    """A rule's on_expire approve is carried out and audited with the rule and file named;
    an agent's shorter expiry on the same call rejects."""
    server = approve_on_expiry
    token = agent_token(server)
    admin = bearer(server.admin_token or "")
    call = {"session_id": "s", "tool_name": "nightly", "tool_args": {"job": "backup"}}
    with httpx.Client(base_url=server.base, timeout=30) as http:
        made = http.post(
            f"{API}/requests", json={**call, "expires_in": 3600}, headers=bearer(token)
        )
        assert made.status_code == 201, made.text
        assert made.json()["on_expire"] == "approve"
        ended = _wait(http, token, made.json()["id"])
        assert ended["status"] == "approved" and ended["decision"]["decided_by"] == "expiry"
        audit = http.get(f"{API}/audit", params={"request_id": ended["id"]}, headers=admin)
        entries = {e["action"]: e for e in audit.json()["items"]}
        set_by = entries["expire"]["details"]["set_by"]
        assert set_by.startswith('rules[0] "nightly-approves-on-expiry" in ')
        assert set_by.endswith("signoff/tools.toml")
        assert entries["submit"]["details"]["request"]["expiry_set_by"] == set_by
        sooner = http.post(
            f"{API}/requests", json={**call, "expires_in": 0.3}, headers=bearer(token)
        )
        assert sooner.json()["on_expire"] == "reject"
        assert _wait(http, token, sooner.json()["id"])["status"] == "expired"
