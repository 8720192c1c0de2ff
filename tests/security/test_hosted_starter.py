"""Hosted runs: every call a run files records who started it, and governance can see it.

The requester of a hosted run's call is the hosted agent; the person who started the run
is the human in its loop. They may approve its calls by default, and count as the
requester (so may not approve) when policy says ``starter_may_approve = false``, names
approvers without them, or asks for a quorum. Attacks against a real ``signoff serve
--agent``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.security.hosting import serve_deploy_agent, tool_log
from tests.serving import Server, agent_token, bearer, new_token


def _person(server: Server, name: str, role: str = "approver") -> dict[str, str]:
    return bearer(new_token(server, name, role)[0])


def _start(http: httpx.Client, who: dict[str, str]) -> dict[str, Any]:
    started = http.post(f"{API}/agents/deploy/runs", json={"prompt": "ship"}, headers=who)
    assert started.status_code == 201, started.text
    task: dict[str, Any] = started.json()
    assert task["status"] == "Paused", task
    return task


def _request(http: httpx.Client, who: dict[str, str], request_id: str) -> dict[str, Any]:
    got = http.get(f"{API}/requests/{request_id}", headers=who)
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


@pytest.fixture
def hosted(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Server]:
    """``signoff serve --agent deploy=...``, with the tools.toml text an indirect param gives."""
    server = serve_deploy_agent(tmp_path, getattr(request, "param", None))
    try:
        yield server
    finally:
        server.stop()


def test_each_call_of_a_run_records_its_starter_and_the_agent_cannot_forge_one(
    hosted: Server, tmp_path: Path
) -> None:
    """started_by is the token that started the run; an agent sending started_by gets 422."""
    with httpx.Client(base_url=hosted.base, timeout=60) as http:
        alice = _person(hosted, "alice")
        task = _start(http, alice)
        request = _request(http, alice, task["request_id"])
        assert request["requested_by"] == "agent:deploy"
        assert request["started_by"] == "alice" and request["starter_may_approve"] is True
        bot = bearer(agent_token(hosted))
        forged = http.post(
            f"{API}/requests",
            json={"session_id": "s", "tool_name": "shell", "started_by": "alice"},
            headers=bot,
        )
        assert forged.status_code == 422, forged.text
        plain = http.post(
            f"{API}/requests", json={"session_id": "s", "tool_name": "shell"}, headers=bot
        )
        assert plain.json()["started_by"] is None
        resumed = http.post(
            f"{API}/resume/{task['request_id']}", json={"action": "approve"}, headers=alice
        )
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "Completed"
    assert tool_log(tmp_path) == ["deploy"]


@pytest.mark.parametrize(
    "hosted",
    [
        "[governance]\nstarter_may_approve = false\n",
        '[[rules]]\ntool = "shell"\naction = "ask"\nstarter_may_approve = false\n',
    ],
    indirect=True,
)
def test_with_starter_may_approve_false_the_starter_counts_as_the_requester(
    hosted: Server, tmp_path: Path
) -> None:
    """The starter's approval is refused (403) on /resume and the decision endpoint; another
    person's approval runs the call."""
    with httpx.Client(base_url=hosted.base, timeout=60) as http:
        alice, bob = _person(hosted, "alice"), _person(hosted, "bob")
        task = _start(http, alice)
        rid = task["request_id"]
        assert _request(http, alice, rid)["starter_may_approve"] is False
        for url, body in (
            (f"{API}/resume/{rid}", {"action": "approve"}),
            (f"{API}/resume/{rid}", {"action": "edit", "args": {"command": "deploy"}}),
            (f"{API}/requests/{rid}/decision", {"type": "approve"}),
            (f"{API}/requests/{rid}/decision", {"type": "approve", "scope": "always"}),
        ):
            refused = http.post(url, json=body, headers=alice)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == "NotAllowed"
            assert "started the run" in refused.json()["detail"]
        assert _request(http, alice, rid)["status"] == "pending"
        assert tool_log(tmp_path) == []
        approved = http.post(
            f"{API}/requests/{rid}/decision", json={"type": "approve"}, headers=bob
        )
        assert approved.status_code == 200, approved.text
        for _ in range(200):
            task = http.get(f"{API}/tasks/{task['task_id']}", headers=alice).json()
            if task["status"] == "Completed":
                break
            http.get(f"{API}/requests/{rid}/wait", params={"timeout": 0.1}, headers=alice)
        assert task["status"] == "Completed", task
    assert tool_log(tmp_path) == ["deploy"]


@pytest.mark.parametrize(
    "hosted", ['[[rules]]\ntool = "shell"\naction = "ask"\nquorum = 2\n'], indirect=True
)
def test_under_a_quorum_the_starters_vote_does_not_count(hosted: Server, tmp_path: Path) -> None:
    """With quorum 2 the starter counts as the requester: two other people must approve."""
    with httpx.Client(base_url=hosted.base, timeout=60) as http:
        alice, bob, carol = (_person(hosted, n) for n in ("alice", "bob", "carol"))
        task = _start(http, alice)
        rid = task["request_id"]
        vote = http.post(f"{API}/requests/{rid}/decision", json={"type": "approve"}, headers=alice)
        assert vote.status_code == 403, vote.text
        assert _request(http, alice, rid)["votes"] == []
        for who in (bob, carol):
            ok = http.post(f"{API}/requests/{rid}/decision", json={"type": "approve"}, headers=who)
            assert ok.status_code == 200, ok.text
        assert _request(http, alice, rid)["status"] in ("approved", "executing", "completed")


@pytest.mark.parametrize(
    "hosted", ['[[rules]]\ntool = "shell"\naction = "ask"\napprovers = ["carol"]\n'], indirect=True
)
def test_designated_approvers_without_the_starter_refuse_them(hosted: Server) -> None:
    """A rule naming approvers without the starter: the starter's resume is 403, carol's works."""
    with httpx.Client(base_url=hosted.base, timeout=60) as http:
        alice, carol = _person(hosted, "alice"), _person(hosted, "carol")
        task = _start(http, alice)
        rid = task["request_id"]
        refused = http.post(f"{API}/resume/{rid}", json={"action": "approve"}, headers=alice)
        assert refused.status_code == 403, refused.text
        assert _request(http, alice, rid)["status"] == "pending"
        done = http.post(f"{API}/resume/{rid}", json={"action": "approve"}, headers=carol)
        assert done.status_code == 200 and done.json()["status"] == "Completed", done.text


def test_a_standing_grant_from_one_starters_run_does_not_cover_anothers(
    hosted: Server, tmp_path: Path
) -> None:
    """Alice approving 'always' on her run does not approve the same call in Bob's run."""
    with httpx.Client(base_url=hosted.base, timeout=60) as http:
        alice, bob = _person(hosted, "alice"), _person(hosted, "bob")
        first = _start(http, alice)
        granted = http.post(
            f"{API}/requests/{first['request_id']}/decision",
            json={"type": "approve", "scope": "always"},
            headers=alice,
        )
        assert granted.status_code == 200, granted.text
        grants = http.get(f"{API}/grants", headers=alice).json()["items"]
        assert [g["started_by"] for g in grants] == ["alice"]
        theirs = _start(http, bob)  # Paused: the grant did not approve Bob's call
        assert _request(http, bob, theirs["request_id"])["status"] == "pending"
        again = http.post(f"{API}/agents/deploy/runs", json={"prompt": "ship"}, headers=alice)
        assert again.status_code == 201 and again.json()["status"] == "Completed", again.text
    assert tool_log(tmp_path) == ["deploy", "deploy"]
